//! Pagoda's guardrails, free of any server code: PII and secret detection with validators,
//! redaction/masking/placeholders (also across streamed chunks), prompt-injection screening
//! behind a `Detector` trait, system-prompt canaries, per-tenant policies and a hash-chained
//! audit log.

pub mod entity;
pub mod error;
pub mod pii;

pub use entity::EntityKind;
pub use error::GuardError;
pub use pii::{Finding, PiiScanner};
pub mod action;
pub mod mask;
pub mod redact;
pub mod stream;

pub use action::Action;
pub use redact::{apply, Applied, Placeholders};
pub use stream::{Emitted, OutputGuard, OutputReport};
pub mod inject;

pub use inject::{BayesDetector, Combined, Detector, RuleDetector, RuleId, Verdict};
pub mod audit;
pub mod canary;
pub mod policy;

pub use audit::{verify, verify_with, Anchor, AuditEvent, AuditKey, AuditLog, Decision, Stage};
pub use policy::{InjectionAction, LeakAction, Policies, Policy, TenantName};
pub mod screen;

pub use screen::{Guard, MessageText, Refusal, Screened};
