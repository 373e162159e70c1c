//! From a model directory to a loaded `CausalLm`.

use std::path::Path;
use std::sync::Arc;

use pagoda_gguf::GgufFile;

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::gguf::{config_from_gguf, GgufWeights};
use crate::matrix::WeightDtype;
use crate::model::CausalLm;
use crate::weights::{DummyWeights, SafetensorsWeights};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadFormat {
    /// The directory's `*.safetensors`.
    #[default]
    Safetensors,
    /// Seeded random weights from `config.json` alone.
    Dummy,
}

/// How a GGUF file's Q4_0 and Q5_0 blocks are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuantRepack {
    /// Widened to Q8_0 where unpacking nibbles costs more than reading the wider blocks
    /// (float products without AVX-512), the file's blocks otherwise.
    #[default]
    Auto,
    /// The file's blocks, read from its map.
    Off,
    /// Always widened to Q8_0: the same values (and products, bit for bit) in 1.5x (Q5_0)
    /// or 1.9x (Q4_0) the bytes.
    Q8_0,
}

/// Where a GGUF file's quantized blocks are read from while the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuantPages {
    /// Copied at load into memory the kernel backs with 2 MiB pages, where it offers them
    /// (transparent huge pages not `never`); read from the file's map otherwise. Decode
    /// streams every weight each token: from the map's 4 KiB pages that is a TLB miss every
    /// 4 KiB, and the hardware prefetchers stop at each page's end (1.2x decode on a Xeon,
    /// docs/benchmarks.md).
    #[default]
    Auto,
    /// Read from the file's map: no copy, shared with the page cache.
    Mapped,
}

/// How a GGUF file's quantized weights are multiplied (`kernels::quant_int`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QuantDot {
    /// Blocks decoded to f32, bitwise the values the file holds, times f32 activations.
    Exact,
    /// Activations quantized to 8 bits per 32 values, products summed in integers: what
    /// llama.cpp does (it takes 256 values per scale for K-quants), and faster
    /// (docs/benchmarks.md).
    #[default]
    Int8,
}

#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub format: LoadFormat,
    /// GGUF files only.
    pub repack: QuantRepack,
    /// GGUF files only.
    pub quant_dot: QuantDot,
    /// GGUF files only.
    pub pages: QuantPages,
    /// The dtype weights are held in; `None` keeps the checkpoint's (`torch_dtype` for dummy
    /// weights, f32 if it names none).
    pub dtype: Option<WeightDtype>,
    /// Seed of dummy weights.
    pub seed: u64,
}

/// Whether `path` is a GGUF file rather than a model directory.
pub fn is_gguf(path: &Path) -> bool {
    GgufFile::is_gguf(path)
}

/// The config of a model directory (`config.json`) or of a GGUF file (its metadata).
pub fn load_config(dir: &Path) -> Result<ModelConfig> {
    if is_gguf(dir) {
        return config_from_gguf(&GgufFile::open(dir)?);
    }
    if !dir.is_dir() {
        return Err(ModelError::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such model directory"),
        ));
    }
    ModelConfig::from_file(&dir.join("config.json"))
}

/// Loads the model in `dir` and returns it with the dtype its weights are held in.
pub fn load_model(dir: &Path, options: &LoadOptions) -> Result<(CausalLm, WeightDtype)> {
    if is_gguf(dir) && options.format == LoadFormat::Safetensors {
        return load_gguf(dir, options);
    }
    let config = load_config(dir)?;
    match options.format {
        LoadFormat::Safetensors => {
            let weights = SafetensorsWeights::open(dir, options.dtype)?;
            Ok((CausalLm::load(&config, &weights)?, weights.dtype()))
        }
        LoadFormat::Dummy => {
            let dtype = options
                .dtype
                .or_else(|| config.torch_dtype.as_deref().and_then(WeightDtype::parse))
                .unwrap_or(WeightDtype::F32);
            let weights = DummyWeights::new(options.seed, dtype);
            Ok((CausalLm::load(&config, &weights)?, dtype))
        }
    }
}

/// A GGUF file's weights stay in their stored types (quantized ones in the file's map).
fn load_gguf(path: &Path, options: &LoadOptions) -> Result<(CausalLm, WeightDtype)> {
    if let Some(dtype) = options.dtype {
        return Err(ModelError::field(
            "dtype",
            format!(
                "{dtype} cannot be applied to a GGUF file, whose tensors keep their stored types"
            ),
        ));
    }
    let file = Arc::new(GgufFile::open(path)?);
    let config = config_from_gguf(&file)?;
    let quantized = file.tensors().any(|t| t.tensor_type.is_quantized());
    let int_dot = options.quant_dot == QuantDot::Int8;
    let widen = match options.repack {
        // Where unpacking nibbles and fifth bits costs more than reading wider blocks
        // (docs/gguf.md): float products without AVX-512. Integer products run as fast on
        // the file's blocks in prefill and faster in decode, which reads fewer bytes.
        QuantRepack::Auto => {
            let avx512 = crate::kernels::isa().vector() == crate::kernels::Isa::Avx512;
            !avx512 && !int_dot
        }
        QuantRepack::Off => false,
        QuantRepack::Q8_0 => true,
    };
    let copy = options.pages == QuantPages::Auto && crate::packed::huge_pages_offered();
    let weights = GgufWeights::new(file, &config, widen, int_dot, copy);
    let model = CausalLm::load(&config, &weights)?;
    // Which products run changes speed and logits, so an operator sees it at startup.
    if quantized {
        tracing::info!(
            "GGUF quantized weights times {}",
            if int_dot {
                "8-bit activations, in integers (--quant-dot int8; exact: f32 products)"
            } else {
                "f32 activations (--quant-dot exact)"
            }
        );
    }
    if weights.copied_bytes() > 0 {
        tracing::info!(
            mib = weights.copied_bytes() >> 20,
            "GGUF quantized weights copied into 2 MiB pages (--quant-pages mapped reads them from the file)"
        );
    }
    if weights.widened_bytes() > 0 {
        tracing::info!(
            mib = weights.widened_bytes() >> 20,
            "Q4_0/Q5_0 weights widened to Q8_0 for the {} kernels (--quant-repack off keeps the file's blocks)",
            crate::kernels::isa()
        );
    }
    Ok((model, weights.dtype()))
}
