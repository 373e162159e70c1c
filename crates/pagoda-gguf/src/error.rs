use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a GGUF file (no GGUF magic)")]
    NotGguf { path: PathBuf },
    #[error("{path} is GGUF version {version}; Pagoda reads versions 2 and 3")]
    UnsupportedVersion { path: PathBuf, version: u32 },
    #[error("{path} is a malformed GGUF file: {reason}")]
    Malformed { path: PathBuf, reason: String },
    #[error(
        "{path} is one of {count} shards of a split GGUF, and its sibling {missing} is not there"
    )]
    MissingShard {
        path: PathBuf,
        missing: PathBuf,
        count: usize,
    },
    #[error("GGUF metadata `{key}` {problem}")]
    Metadata { key: String, problem: String },
}

pub type Result<T, E = GgufError> = std::result::Result<T, E>;
