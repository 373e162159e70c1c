//! Constrained decoding through the engine on the tiny random model, whose free output is
//! gibberish: every seeded sampled output matches its schema, regex or choice, in batches mixed
//! with free requests and across preemption.

mod common;

use common::{collect, engine, prompt, request, wait_until_idle};
use pagoda_runtime::{ConstraintSpec, EngineHandle, FinishReason, GenerateRequest, SamplingParams};
use serde_json::{json, Value};

fn sampled(seed: u64, max_tokens: usize) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        seed: Some(seed),
        max_tokens: Some(max_tokens),
        ..SamplingParams::default()
    }
}

fn constrained(engine: &EngineHandle, spec: &ConstraintSpec, seed: u64) -> GenerateRequest {
    let mut r = request(prompt(engine), sampled(seed, 200), None);
    r.constraint = Some(engine.grammars().unwrap().compile(spec).unwrap());
    r
}

/// Runs `count` seeded requests at once; returns each output's text and how it ended.
fn run_all(engine: &EngineHandle, requests: Vec<GenerateRequest>) -> Vec<(String, FinishReason)> {
    let streams: Vec<_> = requests
        .into_iter()
        .map(|r| engine.submit(r).unwrap())
        .collect();
    streams
        .into_iter()
        .map(|s| {
            let done = collect(s);
            let text: String = done.outputs.iter().map(|o| o.text.as_str()).collect();
            (text, done.completion(0).finish_reason)
        })
        .collect()
}

fn schemas() -> Vec<Value> {
    vec![
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 12},
                "address": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "maxLength": 10},
                        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
                    },
                    "required": ["city", "zip"],
                    "additionalProperties": false
                },
                "nickname": {"type": "string", "maxLength": 6}
            },
            "required": ["name", "address"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "scores": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": -5, "maximum": 100},
                    "minItems": 1,
                    "maxItems": 4
                },
                "ratio": {"type": "number", "minimum": 0, "maximum": 1},
                "level": {"enum": ["low", "mid", "high"]}
            },
            "required": ["scores", "level", "ratio"],
            "additionalProperties": false
        }),
        json!({
            "anyOf": [
                {"type": "object", "properties": {"ok": {"const": true}}, "required": ["ok"], "additionalProperties": false},
                {"type": "object", "properties": {"error": {"type": "string", "maxLength": 8}, "code": {"type": "integer", "minimum": 400, "maximum": 599}}, "required": ["error", "code"], "additionalProperties": false}
            ]
        }),
    ]
}

#[test]
fn every_sampled_output_validates_against_its_schema() {
    let engine = engine(|c| c.max_num_seqs = 64);
    for schema in schemas() {
        let validator = jsonschema::validator_for(&schema).unwrap();
        let spec = ConstraintSpec::JsonSchema(schema.clone());
        let requests = (0..100)
            .map(|seed| constrained(&engine, &spec, seed))
            .collect();
        let outputs = run_all(&engine, requests);
        let mut distinct = std::collections::HashSet::new();
        for (seed, (text, reason)) in outputs.iter().enumerate() {
            assert_eq!(
                *reason,
                FinishReason::Stop,
                "seed {seed}: {text:?} did not finish"
            );
            let value: Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("seed {seed}: {text:?} is not JSON: {e}"));
            assert!(
                validator.is_valid(&value),
                "seed {seed}: {text} breaks {schema}"
            );
            distinct.insert(text.clone());
        }
        // Sampling still samples: the outputs are not one forced string.
        assert!(distinct.len() > 10, "{} distinct outputs", distinct.len());
    }
    assert!(engine.stats().constraint_masks_total > 0);
    wait_until_idle(&engine);
}

#[test]
fn regexes_choices_and_json_objects_hold_for_every_seed() {
    let engine = engine(|c| c.max_num_seqs = 64);
    let regex = ConstraintSpec::Regex(r"[A-Z]{2}-[0-9]{3,5}( [a-z]{1,4})?".into());
    for (seed, (text, reason)) in run_all(
        &engine,
        (0..100).map(|s| constrained(&engine, &regex, s)).collect(),
    )
    .into_iter()
    .enumerate()
    {
        assert_eq!(reason, FinishReason::Stop, "seed {seed}: {text:?}");
        let (code, word) = text.split_once(' ').unwrap_or((&text, ""));
        let (letters, digits) = code.split_once('-').unwrap();
        assert!(
            letters.len() == 2 && letters.bytes().all(|b| b.is_ascii_uppercase()),
            "{text:?}"
        );
        assert!(
            (3..=5).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()),
            "{text:?}"
        );
        assert!(
            word.len() <= 4 && word.bytes().all(|b| b.is_ascii_lowercase()),
            "{text:?}"
        );
    }
    let choices = vec![
        "positive".to_string(),
        "negative".into(),
        "neutral (unsure)".into(),
    ];
    let choice = ConstraintSpec::Choice(choices.clone());
    for (text, reason) in run_all(
        &engine,
        (0..100).map(|s| constrained(&engine, &choice, s)).collect(),
    ) {
        assert_eq!(reason, FinishReason::Stop);
        assert!(choices.contains(&text), "{text:?}");
    }
    for (text, _) in run_all(
        &engine,
        (0..30)
            .map(|s| constrained(&engine, &ConstraintSpec::JsonObject, s))
            .collect(),
    ) {
        // Free-form objects may run past max_tokens; a finished one must parse.
        if let Ok(value) = serde_json::from_str::<Value>(&text) {
            assert!(value.is_object(), "{text}");
        } else {
            assert!(text.starts_with('{'), "{text:?}");
        }
    }
    wait_until_idle(&engine);
}

#[test]
fn constrained_and_free_requests_in_one_batch_give_what_they_give_alone() {
    let engine = engine(|c| c.max_num_seqs = 64);
    let spec = ConstraintSpec::JsonSchema(schemas().remove(1));
    let free = |seed| request(prompt(&engine), sampled(seed, 40), None);
    let mixed_requests: Vec<GenerateRequest> = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                constrained(&engine, &spec, i)
            } else {
                free(i)
            }
        })
        .collect();
    let alone: Vec<_> = mixed_requests
        .iter()
        .map(|r| run_all(&engine, vec![r.clone()]).remove(0))
        .collect();
    let together = run_all(&engine, mixed_requests);
    assert_eq!(together, alone);
    // The free ones really are unconstrained gibberish.
    assert!(together
        .iter()
        .skip(1)
        .step_by(2)
        .any(|(t, _)| serde_json::from_str::<Value>(t).is_err()));
    wait_until_idle(&engine);
}

#[test]
fn n_choices_each_follow_the_constraint_and_preemption_keeps_its_state() {
    // A cache of 24 blocks of 16 tokens: twelve long constrained requests preempt each other.
    let engine = engine(|c| {
        c.kv_cache_memory = 24 * 2 * 2 * 16 * 2 * 32 * 4;
        c.max_model_len = Some(256);
    });
    let spec = ConstraintSpec::Regex("(ab|cd){40,60}".into());
    let alone: Vec<_> = (0..12)
        .map(|s| run_all(&engine, vec![constrained(&engine, &spec, s)]).remove(0))
        .collect();
    assert_eq!(engine.stats().preemptions_total, 0);
    let together = run_all(
        &engine,
        (0..12).map(|s| constrained(&engine, &spec, s)).collect(),
    );
    assert!(
        engine.stats().preemptions_total > 0,
        "the test must force preemption"
    );
    assert_eq!(together, alone);
    let mut r = constrained(&engine, &spec, 99);
    r.sampling.n = 3;
    let done = collect(engine.submit(r).unwrap());
    for index in 0..3 {
        let text = engine
            .tokenizer()
            .decode(&done.token_ids(index), true)
            .unwrap();
        assert!(
            text.len() >= 80
                && text.len() <= 120
                && text.as_bytes().chunks(2).all(|p| p == b"ab" || p == b"cd"),
            "{text:?}"
        );
    }
    wait_until_idle(&engine);
}

#[test]
fn text_the_grammar_forces_is_appended_without_sampling() {
    let engine = engine(|_| {});
    let spec =
        ConstraintSpec::Regex("The verdict, after careful review: (guilty|not guilty)\\.".into());
    for seed in 0..5 {
        let steps_before = engine.stats().steps_total;
        let done = collect(engine.submit(constrained(&engine, &spec, seed)).unwrap());
        let steps = engine.stats().steps_total - steps_before;
        let text: String = done.outputs.iter().map(|o| o.text.as_str()).collect();
        assert!(
            text == "The verdict, after careful review: guilty."
                || text == "The verdict, after careful review: not guilty.",
            "{text:?}"
        );
        let tokens = done.completion(0).usage.completion_tokens;
        assert_eq!(tokens, done.token_ids(0).len());
        // Prefill, then a step per sampled token: the forced text took none of its own.
        assert!(
            steps * 2 <= tokens as u64 + 2,
            "{steps} steps for {tokens} tokens"
        );
    }
    // With logprobs every token is sampled (forced tokens would have none).
    let mut r = constrained(&engine, &spec, 1);
    r.sampling.logprobs = Some(1);
    let done = collect(engine.submit(r).unwrap());
    let logprobs: usize = done.outputs.iter().map(|o| o.logprobs.len()).sum();
    assert_eq!(logprobs, done.token_ids(0).len());
    wait_until_idle(&engine);
}
