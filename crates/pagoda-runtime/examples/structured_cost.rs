//! What constrained decoding costs the engine: mask time per generated token and the decode
//! step time beside it, at batch 1 and 32, for a realistic JSON schema, and the throughput of
//! the same batch unconstrained.
//!
//!     cargo run --release -p pagoda-runtime --example structured_cost -- MODEL_DIR [ROUNDS]
//!
//! MODEL_DIR holds a model's config.json and tokenizer.json; weights are dummy (seeded random,
//! f16), so the outputs are the grammar's choices among random logits. Rounds alternate
//! constrained and free runs of each batch size; medians are printed.

use std::time::{Duration, Instant};

use pagoda_models::{LoadFormat, WeightDtype};
use pagoda_runtime::{ConstraintSpec, EngineConfig, EngineHandle, GenerateRequest, SamplingParams};
use serde_json::json;

const MAX_TOKENS: usize = 192;

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^ORD-[0-9]{6}$"},
            "customer": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 24},
                    "email": {"type": "string", "format": "email", "maxLength": 40},
                    "tier": {"enum": ["free", "pro", "enterprise"]}
                },
                "required": ["name", "email", "tier"],
                "additionalProperties": false
            },
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                        "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
                        "unit_price": {"type": "number", "minimum": 0}
                    },
                    "required": ["sku", "quantity", "unit_price"],
                    "additionalProperties": false
                },
                "minItems": 1,
                "maxItems": 3
            },
            "express": {"type": "boolean"},
            "notes": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 40}]}
        },
        "required": ["order_id", "customer", "items", "express"],
        "additionalProperties": false
    })
}

struct Run {
    tokens: usize,
    wall: Duration,
    steps: u64,
    forward: Duration,
    masks: u64,
    mask_time: Duration,
}

fn run(engine: &EngineHandle, batch: usize, constrained: bool, round: u64) -> Run {
    let before = engine.stats();
    let prompt = engine
        .tokenizer()
        .encode("Write the order as JSON.", false)
        .unwrap();
    let spec = ConstraintSpec::JsonSchema(schema());
    let start = Instant::now();
    let streams: Vec<_> = (0..batch)
        .map(|i| {
            let sampling = SamplingParams {
                temperature: 1.0,
                seed: Some(round * 1000 + i as u64),
                max_tokens: Some(MAX_TOKENS),
                ignore_eos: !constrained,
                ..SamplingParams::default()
            };
            let mut request = GenerateRequest::new(prompt.clone(), sampling);
            if constrained {
                request.constraint = Some(engine.grammars().unwrap().compile(&spec).unwrap());
            }
            engine.submit(request).unwrap()
        })
        .collect();
    let mut tokens = 0;
    for mut stream in streams {
        while let Some(out) = stream.blocking_next() {
            tokens += out.token_ids.len();
        }
    }
    let after = engine.stats();
    Run {
        tokens,
        wall: start.elapsed(),
        steps: after.steps_total - before.steps_total,
        forward: after.forward_time_total - before.forward_time_total,
        masks: after.constraint_masks_total - before.constraint_masks_total,
        mask_time: after.constraint_mask_time_total - before.constraint_mask_time_total,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let model_dir = args
        .next()
        .expect("usage: structured_cost MODEL_DIR [ROUNDS]");
    let rounds: u64 = args.next().map_or(3, |r| r.parse().unwrap());
    let mut config = EngineConfig::new(model_dir);
    config.load.format = LoadFormat::Dummy;
    config.load.dtype = Some(WeightDtype::F16);
    config.max_model_len = Some(1024);
    config.kv_cache_memory = 1 << 30;
    config.max_num_seqs = 32;
    let engine = pagoda_runtime::start(config).unwrap();
    let compile_start = Instant::now();
    let _ = engine
        .grammars()
        .unwrap()
        .compile(&ConstraintSpec::JsonSchema(schema()))
        .unwrap();
    println!(
        "schema compile: {:.2} ms",
        compile_start.elapsed().as_secs_f64() * 1e3
    );
    for batch in [1, 32] {
        let (mut mask_us, mut step_ms, mut share, mut tps_c, mut tps_f) =
            (vec![], vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            let c = run(&engine, batch, true, round);
            let f = run(&engine, batch, false, round);
            mask_us.push(c.mask_time.as_secs_f64() * 1e6 / c.masks.max(1) as f64);
            let step = c.forward.as_secs_f64() / c.steps.max(1) as f64;
            step_ms.push(step * 1e3);
            share.push(c.mask_time.as_secs_f64() / c.steps.max(1) as f64 / step * 100.0);
            tps_c.push(c.tokens as f64 / c.wall.as_secs_f64());
            tps_f.push(f.tokens as f64 / f.wall.as_secs_f64());
        }
        println!(
            "batch {batch:2}: mask {:.0} us/token, forward {:.1} ms/step, masks {:.1}% of a step, \
             tok/s constrained {:.1} free {:.1} (ratio {:.2})",
            median(mask_us),
            median(step_ms),
            median(share),
            median(tps_c.clone()),
            median(tps_f.clone()),
            median(tps_c) / median(tps_f),
        );
    }
    engine.shutdown();
}
