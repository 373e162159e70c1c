//! Model and engine flags shared by the commands that load a model.

use clap::{Args, ValueEnum};
use pagoda_models::{LoadFormat, LoadOptions, WeightDtype};
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

#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model directory, or a Hugging Face hub id (downloaded into the Hugging Face cache).
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
    /// KV cache size, e.g. 2GiB, 512MiB or a byte count.
    #[arg(long, default_value = "2GiB", value_parser = parse_byte_size, env = "PAGODA_KV_CACHE_MEMORY")]
    pub kv_cache_memory: u64,
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
        }
    }

    pub fn engine_config(&self) -> anyhow::Result<EngineConfig> {
        let load = self.load_options();
        let dir =
            pagoda_runtime::resolve_model(&self.model, load.format == LoadFormat::Safetensors)?;
        let mut config = EngineConfig::new(dir);
        config.load = load;
        config.kv_cache_memory = self.kv_cache_memory;
        config.max_model_len = self.max_model_len;
        config.block_size = self.block_size;
        Ok(config)
    }
}

/// Parses sizes like `2GiB`, `512MiB`, `1.5GB`, `4096`.
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size like 2GiB"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(format!(
                "unknown size unit {other:?} (use B, KiB, MiB, GiB, KB, MB, GB)"
            ))
        }
    };
    Ok((value * scale) as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_byte_size;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_byte_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_byte_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_byte_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_byte_size("4096"), Ok(4096));
        assert!(parse_byte_size("lots").is_err());
        assert!(parse_byte_size("3 parsecs").is_err());
    }
}
