//! Structured outputs: what a request asks its output to match (a JSON schema, a regex, one of
//! some strings, a Lark grammar), compiled with llguidance against the model's vocabulary into
//! a `Constraint` that says, before each token, which tokens may come next.
//!
//! `Grammars` is built once per model (it indexes the vocabulary); compiling a request's
//! `ConstraintSpec` happens off the engine thread, so a bad schema is refused before the
//! request reaches the engine. The engine asks each `Constraint` for its mask and tells it the
//! token it sampled.

pub mod constraint;
pub mod error;
pub mod grammars;
pub mod spec;
mod vocab;

pub use constraint::{Constraint, TokenMask};
pub use error::{Result, StructuredError};
pub use grammars::Grammars;
pub use spec::ConstraintSpec;
