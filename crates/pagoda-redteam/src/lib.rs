//! `pagoda redteam`: probe packs (YAML) sent to any OpenAI-compatible endpoint, replies judged
//! by detectors (substring, regex, canary leak, tool call, refusal), attack success rate per
//! probe and overall.

pub mod client;
pub mod detect;
pub mod error;
pub mod obedient;
pub mod probe;
pub mod report;
pub mod runner;
pub mod saved;

pub use error::RedteamError;
pub use probe::{builtin, load, Probe};
pub use report::{ProbeResult, Report};
pub use runner::{run, run_blocking, RunConfig};
pub use saved::SavedReport;
