//! Everything the red-team runner can fail at, each as one line for the CLI.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RedteamError {
    #[error("cannot read probe file {path}: {reason}")]
    ProbeFile { path: PathBuf, reason: String },
    #[error("invalid probes in {source_name}: {reason}")]
    Probes { source_name: String, reason: String },
    #[error("invalid target URL `{0}`: expected http(s)://host[:port]")]
    Target(String),
    #[error("--repeats must be at least 1")]
    Repeats,
    #[error("--max-asr must be within [0, 1], got {0}")]
    MaxAsr(f64),
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
