//! The audit log: one JSON object per line, each carrying the SHA-256 of the line before it
//! and its own, so any edit, deletion or reordering breaks the chain at that line. With a
//! key (`key.rs`) the hashes are HMACs, so the chain cannot be rewritten whole without it;
//! anchors (sequence numbers and hashes kept elsewhere) make truncation visible.
//! Records hold decisions, entity types and counts, rule ids, tenant and request id; never
//! the values that were found.

mod canonical;
mod key;
mod record;
mod verify;
mod writer;

pub use key::AuditKey;
pub use record::{AuditEvent, AuditRecord, Decision, Stage, GENESIS};
pub use verify::{verify, verify_with, Anchor, Verified};
pub use writer::AuditLog;
