//! The profile JSON written by `bench profile` and read by `plan`.

use crate::error::BenchError;
use crate::metrics::Summary;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What one replica of a deployment sustains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub tool: String,
    pub base_url: String,
    pub model: String,
    /// Saturated prefill throughput: prompt tokens/s with one-token outputs at high load.
    pub prefill_tps: f64,
    /// Saturated decode throughput: output tokens/s with short prompts at high load.
    pub decode_tps: f64,
    /// Prompt and output lengths of the mixed workload measured in `loads`.
    pub input_len: u32,
    pub output_len: u32,
    /// Latencies of the mixed workload at increasing load.
    pub loads: Vec<ProfileLoad>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileLoad {
    pub concurrency: u32,
    pub request_throughput: f64,
    pub input_token_throughput: f64,
    pub output_token_throughput: f64,
    pub failed: u64,
    pub ttft_ms: Summary,
    pub itl_ms: Summary,
    pub tpot_ms: Summary,
}

impl Profile {
    pub fn read(path: &Path) -> Result<Self, BenchError> {
        crate::json_file::read_json(path)
    }

    pub fn write(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).expect("profiles always serialise");
        std::fs::write(path, text).map_err(|source| BenchError::WriteFile {
            path: path.to_owned(),
            source,
        })
    }
}
