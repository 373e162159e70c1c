//! Random walks through compiled constraints over a real vocabulary: whatever allowed token is
//! picked, the finished output matches the spec.

use std::path::Path;
use std::sync::Arc;

use pagoda_structured::{ConstraintSpec, Grammars, StructuredError};
use pagoda_text::Tokenizer;
use serde_json::{json, Value};

fn tokenizer() -> Tokenizer {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/models/tiny-qwen2/tokenizer.json");
    Tokenizer::from_file(&path).unwrap()
}

/// A small deterministic generator (splitmix64), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
}

/// Walks `spec` picking allowed tokens, preferring to close (EOS, or a short token) half of
/// the time so walks end. Returns the text, or `None` if 400 tokens were not enough.
fn walk(
    grammars: &Grammars,
    tok: &Tokenizer,
    eos: u32,
    spec: &ConstraintSpec,
    seed: u64,
) -> Option<String> {
    let mut constraint = grammars.compile(spec).unwrap();
    let mut rng = Rng(seed);
    let mut ids = Vec::new();
    for _ in 0..400 {
        let mask = constraint.mask().unwrap().unwrap();
        let words = mask.words();
        let allowed: Vec<u32> = (0..words.len() as u32 * 32)
            .filter(|&t| {
                words
                    .get(t as usize / 32)
                    .is_some_and(|w| w & (1 << (t % 32)) != 0)
            })
            .collect();
        assert!(!allowed.is_empty(), "no token allowed after {ids:?}");
        let token = if allowed.contains(&eos) && rng.below(2) == 0 {
            eos
        } else {
            allowed[rng.below(allowed.len())]
        };
        if token == eos {
            return Some(tok.decode(&ids, false).unwrap());
        }
        constraint.advance(token).unwrap();
        ids.push(token);
        if constraint.is_finished() {
            return Some(tok.decode(&ids, false).unwrap());
        }
    }
    None
}

fn setup() -> (Arc<Tokenizer>, Grammars, u32) {
    let tok = Arc::new(tokenizer());
    let eos = tok.token_to_id("<|endoftext|>").unwrap();
    let grammars = Grammars::new(&tok, 1024, &[eos]).unwrap();
    (tok, grammars, eos)
}

#[test]
fn json_schema_walks_validate() {
    let (tok, grammars, eos) = setup();
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
            "kind": {"anyOf": [{"type": "null"}, {"type": "boolean"}]}
        },
        "required": ["name", "age"],
        "additionalProperties": false
    });
    let validator = jsonschema::validator_for(&schema).unwrap();
    let spec = ConstraintSpec::JsonSchema(schema);
    let mut finished = 0;
    for seed in 0..40 {
        let Some(text) = walk(&grammars, &tok, eos, &spec, seed) else {
            continue;
        };
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(validator.is_valid(&value), "{text}");
        finished += 1;
    }
    assert!(finished >= 30, "only {finished} of 40 walks finished");
}

#[test]
fn regex_and_choice_walks_match() {
    let (tok, grammars, eos) = setup();
    let regex = ConstraintSpec::Regex(r"[a-c]{2,4}-[0-9]+".into());
    for seed in 0..40 {
        if let Some(text) = walk(&grammars, &tok, eos, &regex, seed) {
            assert!(matches_the_regex(&text), "{text:?}");
        }
    }
    let choices = vec!["yes".to_string(), "no".into(), "a.b|c*".into()];
    let choice = ConstraintSpec::Choice(choices.clone());
    for seed in 0..40 {
        let text = walk(&grammars, &tok, eos, &choice, seed).unwrap();
        assert!(choices.contains(&text), "{text:?}");
    }
}

/// `^[a-c]{2,4}-[0-9]+$`, checked by hand.
fn matches_the_regex(s: &str) -> bool {
    let Some((head, tail)) = s.split_once('-') else {
        return false;
    };
    (2..=4).contains(&head.len())
        && head.bytes().all(|b| (b'a'..=b'c').contains(&b))
        && !tail.is_empty()
        && tail.bytes().all(|b| b.is_ascii_digit())
}

#[test]
fn bad_specs_are_invalid_with_a_reason() {
    let (_, grammars, _) = setup();
    for spec in [
        ConstraintSpec::Regex("(unclosed".into()),
        ConstraintSpec::JsonSchema(json!({"type": "no-such-type"})),
        ConstraintSpec::Grammar("start: undefined_rule".into()),
        ConstraintSpec::Choice(vec![]),
    ] {
        match grammars.compile(&spec) {
            Err(StructuredError::Invalid { reason }) => assert!(!reason.is_empty()),
            other => panic!("{spec:?} gave {other:?}"),
        }
    }
}

#[test]
fn a_lark_grammar_constrains_too() {
    let (tok, grammars, eos) = setup();
    let spec = ConstraintSpec::Grammar("start: item (\",\" item)*\nitem: \"x\" | \"yy\"".into());
    for seed in 0..20 {
        if let Some(text) = walk(&grammars, &tok, eos, &spec, seed) {
            assert!(text.split(',').all(|i| i == "x" || i == "yy"), "{text:?}");
        }
    }
}

#[test]
fn a_deferred_constraint_applies_after_its_trigger() {
    let (_, grammars, _) = setup();
    let spec = ConstraintSpec::Choice(vec!["yes".into()]);
    let mut constraint = grammars.compile(&spec).unwrap().after(vec![7, 8]);
    for token in [1, 7, 1, 7] {
        assert!(constraint.mask().unwrap().is_none());
        constraint.advance(token).unwrap();
    }
    constraint.advance(8).unwrap();
    assert!(constraint.is_active());
    let mask = constraint.mask().unwrap().unwrap();
    assert!(mask.num_allowed() > 0 && mask.num_allowed() < 50);
}

/// A tenant's narrowing of a declared schema (`allOf`) is enforced, not just the declared one.
#[test]
fn all_of_narrowing_is_enforced() {
    let (tok, grammars, eos) = setup();
    let schema = json!({"allOf": [
        {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"], "additionalProperties": false},
        {"properties": {"url": {"type": "string", "pattern": "^https://docs\\.example\\.com/[a-z]{1,8}$"}}}
    ]});
    let validator = jsonschema::validator_for(&schema).unwrap();
    let spec = ConstraintSpec::JsonSchema(schema);
    let mut finished = 0;
    for seed in 0..30 {
        if let Some(text) = walk(&grammars, &tok, eos, &spec, seed) {
            let value: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert!(validator.is_valid(&value), "{text}");
            finished += 1;
        }
    }
    assert!(finished >= 20, "{finished}");
}

#[test]
fn forced_text_is_fast_forwarded_as_the_tokenizer_splits_it() {
    let (tok, grammars, _) = setup();
    let spec = ConstraintSpec::Regex("answer: (yes|no)".into());
    let mut constraint = grammars.compile(&spec).unwrap();
    let forced = constraint.fast_forward().unwrap();
    assert!(!forced.is_empty());
    let text = tok.decode(&forced, false).unwrap();
    assert!(
        "answer: ".starts_with(&text) && !text.is_empty(),
        "{text:?}"
    );
    // The forced tokens are the tokenizer's own split of that text.
    assert_eq!(forced, tok.encode(&text, false).unwrap());
    // Past the fixed text only a choice remains: nothing more is forced.
    let mask = constraint.mask().unwrap().unwrap();
    assert!(mask.num_allowed() > 0);
}
