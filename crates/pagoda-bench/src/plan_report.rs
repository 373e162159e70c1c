//! The JSON file `pagoda plan --out FILE` writes: the plan together with the inputs it was
//! computed from, so a reader (the operator console) can show both without the command line.

use crate::error::BenchError;
use crate::plan::{Plan, PlanInput};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The latency targets a plan was checked against, if any.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PlanSlo {
    /// `None` when only the other target was given.
    pub ttft_ms: Option<f64>,
    pub itl_ms: Option<f64>,
    pub percentile: u8,
}

/// A saved plan. Decimals are written as strings, like the plan's own money fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub tool: String,
    /// The `--profile` file the per-replica figures came from, if one was given.
    pub profile: Option<String>,
    pub qps: Decimal,
    pub input_tokens: Decimal,
    pub output_tokens: Decimal,
    pub cache_hit: Decimal,
    pub prefill_tps: Decimal,
    pub decode_tps: Decimal,
    pub headroom: Decimal,
    pub accelerators_per_replica: u64,
    pub accelerator_hour_usd: Decimal,
    pub slo: Option<PlanSlo>,
    pub plan: Plan,
}

impl PlanReport {
    pub fn new(input: &PlanInput, plan: &Plan, profile: Option<&Path>) -> Self {
        // Missing targets are infinite inside the planner; the file says "none" instead.
        let finite = |v: f64| v.is_finite().then_some(v);
        Self {
            tool: format!("pagoda-bench {} plan", env!("CARGO_PKG_VERSION")),
            profile: profile.map(|p| p.display().to_string()),
            qps: input.demand.qps,
            input_tokens: input.demand.input_tokens,
            output_tokens: input.demand.output_tokens,
            cache_hit: input.demand.cache_hit,
            prefill_tps: input.prefill_tps,
            decode_tps: input.decode_tps,
            headroom: input.headroom,
            accelerators_per_replica: input.accelerators_per_replica,
            accelerator_hour_usd: input.accelerator_hour_usd,
            slo: input.slo.map(|s| PlanSlo {
                ttft_ms: finite(s.ttft_ms),
                itl_ms: finite(s.itl_ms),
                percentile: s.percentile,
            }),
            plan: plan.clone(),
        }
    }

    pub fn write(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| BenchError::WriteFile {
            path: path.to_owned(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(path, text).map_err(|source| BenchError::WriteFile {
            path: path.to_owned(),
            source,
        })
    }

    pub fn read(path: &Path) -> Result<Self, BenchError> {
        crate::json_file::read_json(path)
    }
}
