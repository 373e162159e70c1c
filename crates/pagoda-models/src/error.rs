use std::path::PathBuf;

/// Everything that can go wrong on the tensor side, with messages meant for the person
/// running Pagoda: each names the file, field or tensor at fault.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not valid JSON for a model config: {source}")]
    ConfigJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("config field `{field}` {problem}")]
    ConfigField {
        field: &'static str,
        problem: String,
    },
    #[error("unsupported architecture {0:?}: Pagoda runs LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM")]
    UnsupportedArchitecture(String),
    #[error("{dir} holds pickled PyTorch weights ({file}) and no .safetensors: Pagoda loads only safetensors, because unpickling can run arbitrary code from the checkpoint")]
    PickledWeights { dir: PathBuf, file: String },
    #[error("no model weights in {0}: expected model.safetensors or model.safetensors.index.json")]
    NoWeights(PathBuf),
    #[error("{path} is not a valid safetensors file: {reason}")]
    BadSafetensors { path: PathBuf, reason: String },
    #[error("tensor `{name}` is missing from the checkpoint")]
    MissingTensor { name: String },
    #[error("tensor `{name}` has shape {actual:?} but the config implies {expected:?}")]
    WrongShape {
        name: String,
        expected: Vec<usize>,
        actual: Vec<usize>,
    },
    #[error("tensor `{name}` has dtype {dtype}, which Pagoda cannot load (f32, f16 and bf16 are supported)")]
    UnsupportedDtype { name: String, dtype: String },
    #[error("the KV cache budget of {budget_bytes} bytes holds {blocks} blocks of {block_size} tokens, but one sequence of {needed_tokens} tokens needs {needed_blocks}; raise --kv-cache-memory or lower --max-model-len")]
    KvBudgetTooSmall {
        budget_bytes: u64,
        blocks: usize,
        block_size: usize,
        needed_tokens: usize,
        needed_blocks: usize,
    },
    #[error(transparent)]
    Gguf(#[from] pagoda_gguf::GgufError),
    #[error("unsupported GGUF architecture {0:?}: Pagoda runs llama (and Mistral, stored as llama), qwen2 and qwen3")]
    UnsupportedGgufArchitecture(String),
    #[error("tensor `{name}` has type {tensor_type}, which Pagoda cannot run (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K to Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL and IQ4_XS are supported)")]
    UnsupportedTensorType { name: String, tensor_type: String },
    #[error("GGUF tensor `{name}` is malformed: {reason}")]
    BadGgufTensor { name: String, reason: String },
    #[error("invalid forward batch: {0}")]
    InvalidBatch(String),
    #[error("kernel path {0} is not supported by this CPU")]
    UnsupportedKernels(crate::kernels::Isa),
}

pub type Result<T, E = ModelError> = std::result::Result<T, E>;

impl ModelError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn field(field: &'static str, problem: impl Into<String>) -> Self {
        ModelError::ConfigField {
            field,
            problem: problem.into(),
        }
    }
}
