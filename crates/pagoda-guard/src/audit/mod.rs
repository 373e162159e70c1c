//! The audit log: one JSON object per line, each carrying the SHA-256 of the line before it
//! and its own, so any edit, deletion or reordering breaks the chain at that line.
//! Records hold decisions, entity types and counts, rule ids, tenant and request id; never
//! the values that were found.

mod canonical;
mod record;
mod verify;
mod writer;

pub use record::{AuditEvent, AuditRecord, Decision, Stage, GENESIS};
pub use verify::{verify, Verified};
pub use writer::AuditLog;
