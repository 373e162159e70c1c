//! A dummy model with a real published shape (Qwen2.5-0.5B) builds from its config alone and
//! runs a step.

use std::path::PathBuf;

use pagoda_models::loader::{load_model, LoadFormat, LoadOptions};
use pagoda_models::{ForwardBatch, KvCacheShape, LogitsWanted, ModelRunner, WeightDtype};

#[test]
fn qwen2_5_0_5b_shaped_dummy_model_runs_a_step() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/configs/qwen2.5-0.5b");
    let options = LoadOptions {
        format: LoadFormat::Dummy,
        dtype: Some(WeightDtype::BF16),
        seed: 0,
        ..Default::default()
    };
    let (model, dtype) = load_model(&dir, &options).unwrap();
    assert_eq!(dtype, WeightDtype::BF16);
    let cfg = model.config.clone();
    assert_eq!(
        (
            cfg.hidden_size,
            cfg.num_layers,
            cfg.num_heads,
            cfg.num_kv_heads
        ),
        (896, 24, 14, 2)
    );
    assert_eq!(
        (cfg.intermediate_size, cfg.vocab_size, cfg.head_dim),
        (4864, 151936, 64)
    );
    assert!(cfg.tie_word_embeddings);
    // Tied embeddings are held once: 494M parameters at 2 bytes.
    let bytes = model.weight_bytes();
    assert!((980_000_000..1_000_000_000).contains(&bytes), "{bytes}");

    let shape = KvCacheShape::from_budget(&cfg, 16, 64 << 20, 256, WeightDtype::F16).unwrap();
    let mut runner = ModelRunner::new(model, shape);
    let mut batch = ForwardBatch::new(16);
    batch
        .push(&[151643, 9707, 11, 1879], 0, &[3], LogitsWanted::Last)
        .unwrap();
    batch.push(&[42], 0, &[0], LogitsWanted::Last).unwrap();
    let logits = runner.forward(&batch).unwrap();
    assert_eq!(logits.num_rows(), 2);
    assert_eq!(logits.row(0).len(), 151936);
    assert!(logits.data.iter().all(|v| v.is_finite()));
    assert_ne!(logits.row(0), logits.row(1));
}
