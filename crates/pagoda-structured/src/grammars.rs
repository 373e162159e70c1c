//! The per-model compiler: a `ConstraintSpec` in, a ready `Constraint` out.

use std::sync::Arc;

use llguidance::{api::ParserLimits, Matcher, ParserFactory};
use pagoda_text::Tokenizer;
use serde_json::{json, Value};

use crate::constraint::Constraint;
use crate::error::{Result, StructuredError};
use crate::spec::ConstraintSpec;
use crate::vocab::token_env;

/// White space a JSON output may put between tokens: a run of at most 16 (enough for
/// indentation several levels deep), never an endless one a weak model could loop in.
const JSON_WHITESPACE: &str = r"[\x20\x0A\x0D\x09]{1,16}";

/// Holds the vocabulary index; one per model, shared by every request.
pub struct Grammars {
    factory: ParserFactory,
}

impl Grammars {
    /// `logits_size`: the width of the model's output rows; `eos`: its end-of-sequence
    /// tokens, which close a finished grammar.
    pub fn new(tokenizer: &Arc<Tokenizer>, logits_size: usize, eos: &[u32]) -> Result<Grammars> {
        let env = token_env(tokenizer, logits_size, eos)?;
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| StructuredError::Vocabulary(e.to_string()))?;
        factory.quiet();
        *factory.limits_mut() = ParserLimits {
            // Errors quote neither the grammar nor the tokens: they go back to the client.
            verbose_errors: false,
            ..ParserLimits::default()
        };
        Ok(Grammars { factory })
    }

    /// Compiles `spec`; a schema, regex or grammar llguidance cannot take is `Invalid`, with
    /// its reason. Bounded by llguidance's limits (grammar size, lexer states, work per
    /// token), so a hostile schema fails here or in a step, never hangs one.
    pub fn compile(&self, spec: &ConstraintSpec) -> Result<Constraint> {
        if let ConstraintSpec::Choice(choices) = spec {
            if choices.is_empty() {
                return Err(StructuredError::Invalid {
                    reason: "the list of choices is empty".into(),
                });
            }
        }
        let mut grammar = spec.to_grammar();
        for g in &mut grammar.grammars {
            if let Some(schema) = g.json_schema.as_mut() {
                *schema = with_bounded_whitespace(schema.clone());
            }
        }
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| StructuredError::Invalid {
                reason: e.to_string(),
            })?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(reason) = matcher.get_error() {
            return Err(StructuredError::Invalid { reason });
        }
        Ok(Constraint::new(matcher, spec.kind()))
    }
}

/// Sets llguidance's white-space rule unless the schema sets its own (`x-guidance`).
fn with_bounded_whitespace(schema: Value) -> Value {
    match schema {
        Value::Object(mut fields) if !fields.contains_key("x-guidance") => {
            fields.insert(
                "x-guidance".into(),
                json!({"whitespace_pattern": JSON_WHITESPACE}),
            );
            Value::Object(fields)
        }
        other => other,
    }
}
