//! Personal data and secrets in text: one linear scan for candidates, then validators.

mod digits;
pub(crate) mod fold;
mod patterns;
mod scan;
pub mod validate;

pub use patterns::MAX_CANDIDATE_BYTES;
pub use scan::{Finding, PiiScanner, ScanWork};
