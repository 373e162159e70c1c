//! The JSON file `pagoda redteam --out FILE` writes: the report with the tool and the probe
//! pack that produced it, so a reader (the operator console) can tell it apart from other
//! JSON and say which pack it measured.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::RedteamError;
use crate::report::Report;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedReport {
    /// `pagoda-redteam VERSION`.
    pub tool: String,
    /// `builtin` or the probe file given to `--probes`.
    pub pack: String,
    #[serde(flatten)]
    pub report: Report,
}

impl SavedReport {
    pub fn new(pack: &str, report: Report) -> Self {
        Self {
            tool: format!("pagoda-redteam {}", env!("CARGO_PKG_VERSION")),
            pack: pack.to_string(),
            report,
        }
    }

    pub fn write(&self, path: &Path) -> Result<(), RedteamError> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text).map_err(|e| {
            RedteamError::Io(std::io::Error::new(
                e.kind(),
                format!("cannot write {}: {e}", path.display()),
            ))
        })
    }
}
