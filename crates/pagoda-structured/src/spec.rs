//! What a request asks its output to match, in the API's terms.

use llguidance::api::TopLevelGrammar;
use serde_json::{json, Value};

/// One constraint on a whole output.
#[derive(Debug, Clone, PartialEq)]
pub enum ConstraintSpec {
    /// A JSON schema (`response_format: json_schema`, `structured_outputs.json`).
    JsonSchema(Value),
    /// Any JSON object (`response_format: json_object`).
    JsonObject,
    /// A regular expression the whole output matches.
    Regex(String),
    /// Exactly one of these strings.
    Choice(Vec<String>),
    /// A Lark grammar as llguidance takes it (which accepts GBNF-style `::=` rules too).
    Grammar(String),
}

impl ConstraintSpec {
    pub(crate) fn to_grammar(&self) -> TopLevelGrammar {
        match self {
            ConstraintSpec::JsonSchema(schema) => TopLevelGrammar::from_json_schema(schema.clone()),
            ConstraintSpec::JsonObject => {
                TopLevelGrammar::from_json_schema(json!({"type": "object"}))
            }
            ConstraintSpec::Regex(regex) => TopLevelGrammar::from_regex(regex),
            ConstraintSpec::Choice(choices) => {
                let alternatives: Vec<String> =
                    choices.iter().map(|c| regex_syntax::escape(c)).collect();
                TopLevelGrammar::from_regex(&format!("(?:{})", alternatives.join("|")))
            }
            ConstraintSpec::Grammar(lark) => TopLevelGrammar::from_lark(lark.clone()),
        }
    }

    /// Its kind, for messages and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            ConstraintSpec::JsonSchema(_) => "json_schema",
            ConstraintSpec::JsonObject => "json_object",
            ConstraintSpec::Regex(_) => "regex",
            ConstraintSpec::Choice(_) => "choice",
            ConstraintSpec::Grammar(_) => "grammar",
        }
    }
}
