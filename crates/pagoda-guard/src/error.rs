//! Everything that can go wrong in the guard crate.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    #[error("cannot read policy file {path}: {reason}")]
    PolicyFile { path: PathBuf, reason: String },
    #[error("invalid policy: {0}")]
    Policy(String),
    #[error("unknown entity type `{0}`")]
    UnknownEntity(String),
    #[error("audit log {path}: {reason}")]
    Audit { path: PathBuf, reason: String },
    #[error("audit log tampered at line {line}: {reason}")]
    AuditTampered { line: usize, reason: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
