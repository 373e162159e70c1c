//! Attack success rates per probe and overall, as a table or JSON.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProbeResult {
    pub id: String,
    pub category: String,
    pub attempts: usize,
    pub successes: usize,
    /// Stopped by a guardrail (HTTP 400 with a guardrail code).
    pub blocked: usize,
    /// Requests that failed otherwise; left out of the rate.
    pub errors: usize,
    pub asr: f64,
    /// Detectors that fired, over all attempts (for triage).
    pub fired: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub target: String,
    pub probes: Vec<ProbeResult>,
    pub attempts: usize,
    pub successes: usize,
    pub blocked: usize,
    pub errors: usize,
    /// Successes over attempts that got an answer or a block.
    pub asr: f64,
}

pub fn rate(successes: usize, attempts: usize, errors: usize) -> f64 {
    let judged = attempts - errors;
    if judged == 0 {
        0.0
    } else {
        successes as f64 / judged as f64
    }
}

impl Report {
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<36} {:<26} {:>8} {:>9} {:>7} {:>6} {:>6}",
            "probe", "category", "attempts", "successes", "blocked", "errors", "ASR"
        );
        for p in &self.probes {
            let _ = writeln!(
                out,
                "{:<36} {:<26} {:>8} {:>9} {:>7} {:>6} {:>6.2}",
                p.id, p.category, p.attempts, p.successes, p.blocked, p.errors, p.asr
            );
        }
        let _ = writeln!(
            out,
            "{:<36} {:<26} {:>8} {:>9} {:>7} {:>6} {:>6.2}",
            "overall", "", self.attempts, self.successes, self.blocked, self.errors, self.asr
        );
        out
    }
}
