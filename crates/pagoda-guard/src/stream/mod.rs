//! Filtering streamed output: each stage takes text deltas and returns what may be sent now,
//! holding back only the tail that could still turn into something it must rewrite.

mod canary;
mod holdback;
mod output;
mod overlap;
mod pii;
mod restore;

pub use canary::CanaryStream;
pub use output::{Emitted, OutputGuard, OutputReport};
pub use overlap::{OverlapStream, PromptWindows};
pub use pii::PiiStream;
pub use restore::RestoreStream;
