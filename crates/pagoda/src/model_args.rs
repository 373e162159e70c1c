//! Model and engine flags shared by the commands that load a model.

use clap::{Args, ValueEnum};
use pagoda_models::{
    KvCacheDtype, LoadFormat, LoadOptions, QuantDot, QuantPages, QuantRepack, WeightDtype,
};
use pagoda_runtime::EngineConfig;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LoadFormatArg {
    /// The checkpoint's safetensors files.
    Auto,
    /// Seeded random weights from config.json alone (benchmarks without downloads).
    Dummy,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DtypeArg {
    /// Keep the checkpoint's dtype.
    Auto,
    Float32,
    Float16,
    Bfloat16,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum QuantRepackArg {
    /// Q4_0/Q5_0 widened to Q8_0 where that is faster (exact products without AVX-512);
    /// kept otherwise.
    Auto,
    /// The GGUF file's blocks as they are (least memory).
    Off,
    /// Q4_0/Q5_0 always widened to Q8_0 (same values, 1.5-1.9x their bytes).
    #[value(name = "q8_0")]
    Q8_0,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum QuantPagesArg {
    /// Copied at load into memory backed by 2 MiB pages where the kernel offers them
    /// (faster decode); the file's map otherwise.
    Auto,
    /// Read from the file's map (no copy, 4 KiB pages shared with the page cache).
    Mapped,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum QuantDotArg {
    /// The file's weights decoded to f32 and multiplied by f32 activations.
    Exact,
    /// Activations quantized to 8 bits per 32 values and multiplied in integers, as
    /// llama.cpp does: faster decode and prefill, logits a little further from exact.
    Int8,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KvCacheDtypeArg {
    /// The weights' dtype (a 16-bit checkpoint gets a 16-bit cache).
    Auto,
    Float32,
    Float16,
    Bfloat16,
}

impl KvCacheDtypeArg {
    pub fn dtype(self) -> KvCacheDtype {
        match self {
            KvCacheDtypeArg::Auto => KvCacheDtype::Auto,
            KvCacheDtypeArg::Float32 => KvCacheDtype::Fixed(WeightDtype::F32),
            KvCacheDtypeArg::Float16 => KvCacheDtype::Fixed(WeightDtype::F16),
            KvCacheDtypeArg::Bfloat16 => KvCacheDtype::Fixed(WeightDtype::BF16),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model directory, GGUF file, or Hugging Face hub id (downloaded into the Hugging Face
    /// cache; `repo:QUANT` picks one GGUF file of the repo, e.g. `...-GGUF:Q4_K_M`).
    #[arg(long, env = "PAGODA_MODEL")]
    pub model: String,
    #[arg(long, value_enum, default_value = "auto", env = "PAGODA_LOAD_FORMAT")]
    pub load_format: LoadFormatArg,
    /// Dtype weights are held in (activations are always float32 on the CPU).
    #[arg(long, value_enum, default_value = "auto", env = "PAGODA_DTYPE")]
    pub dtype: DtypeArg,
    /// Seed of dummy weights.
    #[arg(long, default_value_t = 0)]
    pub dummy_seed: u64,
    /// How a GGUF file's Q4_0/Q5_0 blocks are held in memory.
    #[arg(long, value_enum, default_value = "auto", env = "PAGODA_QUANT_REPACK")]
    pub quant_repack: QuantRepackArg,
    /// How a GGUF file's quantized weights are multiplied (int8 as llama.cpp does, or exact).
    #[arg(long, value_enum, default_value = "int8", env = "PAGODA_QUANT_DOT")]
    pub quant_dot: QuantDotArg,
    /// Where a GGUF file's quantized weights are read from while the model runs.
    #[arg(long, value_enum, default_value = "auto", env = "PAGODA_QUANT_PAGES")]
    pub quant_pages: QuantPagesArg,
    /// KV cache size, e.g. 2GiB, 512MiB or a byte count.
    #[arg(long, default_value = "2GiB", value_parser = pagoda_server::parse_byte_size, env = "PAGODA_KV_CACHE_MEMORY")]
    pub kv_cache_memory: u64,
    /// What the KV cache stores.
    #[arg(
        long,
        value_enum,
        default_value = "auto",
        env = "PAGODA_KV_CACHE_DTYPE"
    )]
    pub kv_cache_dtype: KvCacheDtypeArg,
    /// Longest prompt plus output; defaults to the model's max_position_embeddings.
    #[arg(long, env = "PAGODA_MAX_MODEL_LEN")]
    pub max_model_len: Option<usize>,
    /// Tokens per KV block.
    #[arg(long, default_value_t = 16)]
    pub block_size: usize,
}

impl ModelArgs {
    pub fn load_options(&self) -> LoadOptions {
        LoadOptions {
            format: match self.load_format {
                LoadFormatArg::Auto => LoadFormat::Safetensors,
                LoadFormatArg::Dummy => LoadFormat::Dummy,
            },
            dtype: match self.dtype {
                DtypeArg::Auto => None,
                DtypeArg::Float32 => Some(WeightDtype::F32),
                DtypeArg::Float16 => Some(WeightDtype::F16),
                DtypeArg::Bfloat16 => Some(WeightDtype::BF16),
            },
            seed: self.dummy_seed,
            repack: match self.quant_repack {
                QuantRepackArg::Auto => QuantRepack::Auto,
                QuantRepackArg::Off => QuantRepack::Off,
                QuantRepackArg::Q8_0 => QuantRepack::Q8_0,
            },
            quant_dot: match self.quant_dot {
                QuantDotArg::Exact => QuantDot::Exact,
                QuantDotArg::Int8 => QuantDot::Int8,
            },
            pages: match self.quant_pages {
                QuantPagesArg::Auto => QuantPages::Auto,
                QuantPagesArg::Mapped => QuantPages::Mapped,
            },
        }
    }

    pub fn engine_config(&self) -> anyhow::Result<EngineConfig> {
        let load = self.load_options();
        let dir =
            pagoda_runtime::resolve_model(&self.model, load.format == LoadFormat::Safetensors)?;
        let mut config = EngineConfig::new(dir);
        config.load = load;
        config.kv_cache_memory = self.kv_cache_memory;
        config.kv_cache_dtype = self.kv_cache_dtype.dtype();
        config.max_model_len = self.max_model_len;
        config.block_size = self.block_size;
        Ok(config)
    }
}
