//! Turning request records into figures: a table for people and JSON for machines.

use crate::arrivals::Load;
use crate::error::BenchError;
use crate::metrics::Summary;
use crate::record::{RequestRecord, Success, TokenSource};
use crate::runner::RunRecords;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Service-level objectives a request must meet to count towards goodput.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
}

impl Slo {
    /// A failed request never meets the SLO; a one-token reply has no TPOT to miss.
    pub fn is_met_by(&self, success: &Success) -> bool {
        let ttft_ok = self.ttft_ms.is_none_or(|limit| ms(success.ttft) <= limit);
        let tpot_ok = match (self.tpot_ms, success.tpot()) {
            (Some(limit), Some(tpot)) => ms(tpot) <= limit,
            _ => true,
        };
        ttft_ok && tpot_ok
    }
}

/// The figures of one load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub load: Load,
    pub duration_s: f64,
    /// Measured requests sent (warm-up excluded); always `completed + failed`.
    pub requests: u64,
    pub completed: u64,
    pub failed: u64,
    /// Failed requests by kind (`http_429`, `timeout`, ...).
    pub errors_by_kind: BTreeMap<String, u64>,
    /// The first error message seen for each kind.
    pub error_examples: BTreeMap<String, String>,
    pub request_throughput: f64,
    pub input_token_throughput: f64,
    pub output_token_throughput: f64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub slo: Slo,
    /// Requests that completed and met the SLO.
    pub good_requests: u64,
    /// `good_requests / duration_s`.
    pub goodput: f64,
    /// Where token counts came from, with the number of requests counted each way.
    pub input_token_sources: BTreeMap<TokenSource, u64>,
    pub output_token_sources: BTreeMap<TokenSource, u64>,
    pub ttft_ms: Summary,
    pub tpot_ms: Summary,
    pub itl_ms: Summary,
    pub e2e_ms: Summary,
}

/// Everything one `bench serve` invocation measured, as written to the JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub tool: String,
    pub base_url: String,
    pub model: String,
    pub endpoint: String,
    pub workload: String,
    pub runs: Vec<RunReport>,
}

impl BenchReport {
    pub fn read(path: &Path) -> Result<Self, BenchError> {
        crate::json_file::read_json(path)
    }

    pub fn write(&self, path: &Path) -> Result<(), BenchError> {
        let text = serde_json::to_string_pretty(self).expect("reports always serialise");
        std::fs::write(path, text).map_err(|source| BenchError::WriteFile {
            path: path.to_owned(),
            source,
        })
    }
}

pub fn ms(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// Latency samples of the successful requests, in milliseconds.
pub struct LatencySamples {
    pub ttft: Vec<f64>,
    pub tpot: Vec<f64>,
    pub itl: Vec<f64>,
    pub e2e: Vec<f64>,
}

impl LatencySamples {
    pub fn of(records: &[RequestRecord]) -> Self {
        let successes = || records.iter().filter_map(|r| r.outcome.as_ref().ok());
        Self {
            ttft: successes().map(|s| ms(s.ttft)).collect(),
            tpot: successes().filter_map(|s| s.tpot().map(ms)).collect(),
            itl: successes()
                .flat_map(|s| s.inter_token.iter().copied().map(ms))
                .collect(),
            e2e: successes().map(|s| ms(s.e2e)).collect(),
        }
    }
}

impl RunReport {
    pub fn from_records(load: Load, run: &RunRecords, slo: Slo) -> Self {
        let duration_s = run.wall.as_secs_f64().max(f64::MIN_POSITIVE);
        let mut report = Self {
            load,
            duration_s,
            requests: run.records.len() as u64,
            completed: 0,
            failed: 0,
            errors_by_kind: BTreeMap::new(),
            error_examples: BTreeMap::new(),
            request_throughput: 0.0,
            input_token_throughput: 0.0,
            output_token_throughput: 0.0,
            total_input_tokens: 0,
            total_output_tokens: 0,
            slo,
            good_requests: 0,
            goodput: 0.0,
            input_token_sources: BTreeMap::new(),
            output_token_sources: BTreeMap::new(),
            ttft_ms: Summary::default(),
            tpot_ms: Summary::default(),
            itl_ms: Summary::default(),
            e2e_ms: Summary::default(),
        };
        for record in &run.records {
            match &record.outcome {
                Ok(success) => report.count_success(success, slo),
                Err(failure) => {
                    report.failed += 1;
                    let label = failure.kind.label();
                    *report.errors_by_kind.entry(label.clone()).or_default() += 1;
                    report
                        .error_examples
                        .entry(label)
                        .or_insert_with(|| failure.message.clone());
                }
            }
        }
        report.request_throughput = report.completed as f64 / duration_s;
        report.input_token_throughput = report.total_input_tokens as f64 / duration_s;
        report.output_token_throughput = report.total_output_tokens as f64 / duration_s;
        report.goodput = report.good_requests as f64 / duration_s;
        let samples = LatencySamples::of(&run.records);
        report.ttft_ms = Summary::of(&samples.ttft);
        report.tpot_ms = Summary::of(&samples.tpot);
        report.itl_ms = Summary::of(&samples.itl);
        report.e2e_ms = Summary::of(&samples.e2e);
        report
    }

    /// Fraction of the measured requests, failed ones included, that met the SLO.
    pub fn slo_attainment(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        self.good_requests as f64 / self.requests as f64
    }

    fn count_success(&mut self, success: &Success, slo: Slo) {
        self.completed += 1;
        self.total_input_tokens += success.input_tokens;
        self.total_output_tokens += success.output_tokens;
        *self
            .input_token_sources
            .entry(success.input_source)
            .or_default() += 1;
        *self
            .output_token_sources
            .entry(success.output_source)
            .or_default() += 1;
        if slo.is_met_by(success) {
            self.good_requests += 1;
        }
    }

    /// The human-readable block printed after each load level.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "==== {} ====", self.load);
        let row = |out: &mut String, label: &str, value: String| {
            let _ = writeln!(out, "{label:<36}{value}");
        };
        row(
            &mut out,
            "Requests sent/completed/failed:",
            format!("{} / {} / {}", self.requests, self.completed, self.failed),
        );
        if !self.errors_by_kind.is_empty() {
            let kinds: Vec<String> = self
                .errors_by_kind
                .iter()
                .map(|(kind, n)| format!("{kind}: {n}"))
                .collect();
            row(&mut out, "Failures by kind:", kinds.join(", "));
            for (kind, message) in &self.error_examples {
                row(&mut out, &format!("  first {kind}:"), message.clone());
            }
        }
        row(&mut out, "Duration (s):", format!("{:.3}", self.duration_s));
        row(
            &mut out,
            "Request throughput (req/s):",
            format!("{:.2}", self.request_throughput),
        );
        row(
            &mut out,
            "Input token throughput (tok/s):",
            format!("{:.1}", self.input_token_throughput),
        );
        row(
            &mut out,
            "Output token throughput (tok/s):",
            format!("{:.1}", self.output_token_throughput),
        );
        row(
            &mut out,
            "Goodput (req/s):",
            format!(
                "{:.2}  ({} of {} requests {})",
                self.goodput,
                self.good_requests,
                self.requests,
                describe_slo(&self.slo)
            ),
        );
        row(
            &mut out,
            "Token counts (input | output):",
            format!(
                "{} | {}",
                describe_sources(&self.input_token_sources),
                describe_sources(&self.output_token_sources)
            ),
        );
        let _ = writeln!(
            out,
            "Latency (ms) over the {} completed requests:",
            self.completed
        );
        let _ = writeln!(
            out,
            "  {:<6}{:>10}{:>10}{:>10}{:>10}",
            "", "mean", "median", "p90", "p99"
        );
        for (name, s) in [
            ("TTFT", &self.ttft_ms),
            ("TPOT", &self.tpot_ms),
            ("ITL", &self.itl_ms),
            ("E2E", &self.e2e_ms),
        ] {
            let _ = writeln!(
                out,
                "  {name:<6}{:>10.2}{:>10.2}{:>10.2}{:>10.2}",
                s.mean, s.median, s.p90, s.p99
            );
        }
        out
    }
}

/// How the good requests were selected, completing "N of M requests ...".
fn describe_slo(slo: &Slo) -> String {
    match (slo.ttft_ms, slo.tpot_ms) {
        (None, None) => "completed; no SLO set".into(),
        (Some(t), None) => format!("met TTFT<={t}ms"),
        (None, Some(p)) => format!("met TPOT<={p}ms"),
        (Some(t), Some(p)) => format!("met TTFT<={t}ms and TPOT<={p}ms"),
    }
}

fn describe_sources(sources: &BTreeMap<TokenSource, u64>) -> String {
    if sources.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = sources
        .iter()
        .map(|(source, n)| {
            let name = match source {
                TokenSource::Usage => "server usage",
                TokenSource::Tokenizer => "tokenizer",
                TokenSource::Estimate => "estimate (chunks/words)",
            };
            format!("{name} x{n}")
        })
        .collect();
    parts.join(", ")
}

/// One line per load level, for sweeps.
pub fn sweep_table(runs: &[RunReport]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26}{:>9}{:>8}{:>10}{:>12}{:>10}{:>10}{:>10}{:>10}",
        "load",
        "req/s",
        "failed",
        "goodput",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99"
    );
    for run in runs {
        let _ = writeln!(
            out,
            "{:<26}{:>9.2}{:>8}{:>10.2}{:>12.1}{:>10.1}{:>10.1}{:>10.2}{:>10.2}",
            run.load.to_string(),
            run.request_throughput,
            run.failed,
            run.goodput,
            run.output_token_throughput,
            run.ttft_ms.median,
            run.ttft_ms.p99,
            run.tpot_ms.median,
            run.tpot_ms.p99
        );
    }
    out
}
