//! Shared helpers: the committed fixture models and their transformers references, and a
//! tiny stand-in for the engine's block manager that hands out scattered blocks.

#![allow(dead_code)]

use std::path::PathBuf;

use pagoda_models::loader::{load_model, LoadOptions};
use pagoda_models::{ForwardBatch, Isa, KvCacheShape, LogitsWanted, ModelRunner, WeightDtype};

pub const MODELS: [&str; 5] = [
    "tiny-llama",
    "tiny-llama-linear",
    "tiny-mistral",
    "tiny-qwen2",
    "tiny-qwen3",
];
pub const BLOCK_SIZE: usize = 16;

pub fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/models")
        .join(name)
}

pub struct Case {
    pub prompt: String,
    pub input_ids: Vec<u32>,
    pub last_logits: Vec<f32>,
    pub greedy_ids: Vec<u32>,
}

pub fn reference_cases(name: &str) -> Vec<Case> {
    let text = std::fs::read_to_string(model_dir(name).join("reference.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            prompt: c["prompt"].as_str().unwrap().to_string(),
            input_ids: ids(&c["input_ids"]),
            last_logits: c["last_logits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect(),
            greedy_ids: ids(&c["greedy_ids"]),
        })
        .collect()
}

pub fn runner(name: &str, num_blocks: usize) -> ModelRunner {
    runner_with_kv(name, num_blocks, WeightDtype::F32)
}

/// A runner on kernel path `isa` (f32 KV cache).
pub fn runner_on(name: &str, num_blocks: usize, isa: Isa) -> ModelRunner {
    let shape = runner(name, num_blocks).kv_shape();
    let (model, _) = load_model(&model_dir(name), &LoadOptions::default()).unwrap();
    ModelRunner::with_isa(model, shape, isa).unwrap()
}

/// A runner whose KV cache stores `kv_dtype`.
pub fn runner_with_kv(name: &str, num_blocks: usize, kv_dtype: WeightDtype) -> ModelRunner {
    let (model, _) = load_model(&model_dir(name), &LoadOptions::default()).unwrap();
    let cfg = &model.config;
    let shape = KvCacheShape {
        num_layers: cfg.num_layers,
        num_blocks,
        block_size: BLOCK_SIZE,
        num_kv_heads: cfg.num_kv_heads,
        head_dim: cfg.head_dim,
        dtype: kv_dtype,
    };
    ModelRunner::new(model, shape)
}

/// Hands out physical blocks in a scrambled order, so block tables are neither contiguous
/// nor sorted.
pub struct ScatteredBlocks {
    free: Vec<u32>,
}

impl ScatteredBlocks {
    pub fn new(num_blocks: usize, seed: u64) -> Self {
        let mut free: Vec<u32> = (0..num_blocks as u32).collect();
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        for i in (1..free.len()).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            free.swap(i, (state >> 33) as usize % (i + 1));
        }
        ScatteredBlocks { free }
    }

    pub fn take(&mut self) -> u32 {
        self.free.pop().expect("test cache too small")
    }
}

/// A sequence being run by the tests: its tokens so far, how many are in the cache, and
/// its block table.
pub struct Sequence {
    pub tokens: Vec<u32>,
    pub computed: usize,
    pub blocks: Vec<u32>,
}

impl Sequence {
    pub fn new(tokens: &[u32]) -> Self {
        Sequence {
            tokens: tokens.to_vec(),
            computed: 0,
            blocks: Vec::new(),
        }
    }

    /// Adds the next `n` uncomputed tokens to `batch`, growing the block table as needed.
    pub fn schedule(&mut self, n: usize, batch: &mut ForwardBatch, alloc: &mut ScatteredBlocks) {
        let end = self.computed + n;
        while self.blocks.len() * BLOCK_SIZE < end {
            self.blocks.push(alloc.take());
        }
        batch
            .push(
                &self.tokens[self.computed..end],
                self.computed,
                &self.blocks,
                LogitsWanted::Last,
            )
            .unwrap();
        self.computed = end;
    }
}

pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    best as u32
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Runs one sequence alone: a whole-prompt prefill, then `steps` greedy decode steps.
/// Returns the logits after the prompt and after each decoded token, and the tokens.
pub fn run_alone(
    runner: &mut ModelRunner,
    prompt: &[u32],
    steps: usize,
    seed: u64,
) -> (Vec<Vec<f32>>, Vec<u32>) {
    let mut alloc = ScatteredBlocks::new(runner.kv_shape().num_blocks, seed);
    let mut seq = Sequence::new(prompt);
    let mut all_logits = Vec::new();
    let mut generated = Vec::new();
    let mut n = prompt.len();
    for _ in 0..=steps {
        let mut batch = ForwardBatch::new(BLOCK_SIZE);
        seq.schedule(n, &mut batch, &mut alloc);
        let logits = runner.forward(&batch).unwrap();
        let row = logits.row(0).to_vec();
        let next = argmax(&row);
        all_logits.push(row);
        generated.push(next);
        seq.tokens.push(next);
        n = 1;
    }
    generated.pop();
    (all_logits, generated)
}
