//! Loading: the model, tokenizer and generation config from a model directory, the context
//! limit, and the KV cache sized from the memory budget; out comes an engine core ready to run.

use std::path::PathBuf;
use std::sync::Arc;

use pagoda_engine::{Scheduler, SchedulerConfig};
use pagoda_gguf::GgufFile;
use pagoda_models::config::TokenIds;
use pagoda_models::loader::{is_gguf, load_model};
use pagoda_models::{
    Architecture, GenerationConfig, KvCacheShape, ModelConfig, ModelRunner, WeightDtype,
};
use pagoda_structured::Grammars;
use pagoda_text::Tokenizer;

use crate::config::EngineConfig;
use crate::core::EngineCore;
use crate::error::Result;

/// Facts about the loaded model that callers need.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub model_dir: PathBuf,
    pub architecture: Architecture,
    pub max_model_len: usize,
    pub vocab_size: usize,
    pub eos_token_ids: Vec<u32>,
    pub generation_config: GenerationConfig,
    pub weight_dtype: WeightDtype,
    /// What the matrices are stored as (`float16`; GGUF types such as `Q8_0`).
    pub weight_types: String,
    pub weight_bytes: usize,
    pub kv_cache: KvCacheShape,
    pub kv_cache_bytes: u64,
}

pub(crate) struct Loaded {
    pub core: EngineCore,
    pub info: ModelInfo,
    pub tokenizer: Arc<Tokenizer>,
    /// The compiler of output constraints, or why this model has none.
    pub grammars: Result<Arc<Grammars>, String>,
}

/// Loads everything `config` names and builds the engine core (not started).
pub(crate) fn load(config: &EngineConfig) -> Result<Loaded> {
    let (model, weight_dtype) = load_model(&config.model_dir, &config.load)?;
    // A GGUF file carries its tokenizer in its metadata, and no generation config (its stop
    // tokens are in the model config).
    let (tokenizer, generation_config) = if is_gguf(&config.model_dir) {
        let file = GgufFile::open(&config.model_dir)?;
        let stop_ids = pagoda_text::gguf::special_tokens(&file)?.stop_ids();
        let generation_config = GenerationConfig {
            eos_token_id: Some(TokenIds::Many(stop_ids)),
            ..GenerationConfig::default()
        };
        (Tokenizer::from_gguf(&file)?, generation_config)
    } else {
        (
            Tokenizer::from_file(&config.model_dir.join("tokenizer.json"))?,
            GenerationConfig::load_optional(&config.model_dir)?,
        )
    };
    let tokenizer = Arc::new(tokenizer);
    let model_cfg = model.config.clone();
    let max_model_len = max_model_len(config, &model_cfg)?;
    let kv_shape = KvCacheShape::from_budget(
        &model_cfg,
        config.block_size,
        config.kv_cache_memory,
        max_model_len,
        config.kv_cache_dtype.resolve(weight_dtype),
    )?;
    let mut eos_token_ids = generation_config.eos_token_ids();
    if eos_token_ids.is_empty() {
        eos_token_ids = model_cfg.eos_token_ids.clone();
    }
    // The sampler and the grammar engine index logits by stop token.
    if let Some(id) = eos_token_ids
        .iter()
        .find(|&&id| id as usize >= model_cfg.vocab_size)
    {
        return Err(pagoda_models::ModelError::ConfigField {
            field: "eos_token_id",
            problem: format!(
                "({id}) is outside the model's vocabulary of {} tokens",
                model_cfg.vocab_size
            ),
        }
        .into());
    }
    let mut scheduler = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: config.max_num_batched_tokens,
            max_num_seqs: config.max_num_seqs,
            max_prefill_chunk: config.max_prefill_chunk,
            block_size: config.block_size,
            num_blocks: kv_shape.num_blocks,
            max_model_len,
            enable_prefix_caching: config.enable_prefix_caching,
            target_itl_ms: config.target_itl_ms,
            min_prefill_tokens: config.min_prefill_tokens,
            ..SchedulerConfig::default()
        },
        eos_token_ids.clone(),
    )?;
    let info = ModelInfo {
        model_dir: config.model_dir.clone(),
        architecture: model_cfg.architecture,
        max_model_len,
        vocab_size: model_cfg.vocab_size,
        eos_token_ids,
        generation_config,
        weight_dtype,
        weight_types: model.weight_types(),
        weight_bytes: model.weight_bytes(),
        kv_cache: kv_shape,
        kv_cache_bytes: kv_shape.total_bytes(),
    };
    let grammars = Grammars::new(&tokenizer, model_cfg.vocab_size, &info.eos_token_ids)
        .map(Arc::new)
        .map_err(|e| e.to_string());
    let runner = ModelRunner::new(model, kv_shape);
    if config.kv_events.is_some() {
        scheduler.enable_kv_events();
    }
    let mut core = EngineCore::new(scheduler, runner, tokenizer.clone());
    core.set_max_unread_outputs(config.max_unread_outputs);
    core.set_kv_events(config.kv_events.clone());
    // AllBlocksCleared goes out at once: a router forgets what an earlier run announced.
    core.publish_kv_events();
    #[cfg(feature = "fault-injection")]
    core.set_faults(config.faults.clone());
    Ok(Loaded {
        core,
        info,
        tokenizer,
        grammars,
    })
}

/// The context limit: as configured, else the model's `max_position_embeddings`, which it may
/// not exceed.
fn max_model_len(config: &EngineConfig, model_cfg: &ModelConfig) -> Result<usize> {
    let max_model_len = config
        .max_model_len
        .unwrap_or(model_cfg.max_position_embeddings);
    if max_model_len > model_cfg.max_position_embeddings {
        return Err(pagoda_models::ModelError::ConfigField {
            field: "max_model_len",
            problem: format!(
                "({max_model_len}) exceeds the model's max_position_embeddings ({})",
                model_cfg.max_position_embeddings
            ),
        }
        .into());
    }
    Ok(max_model_len)
}
