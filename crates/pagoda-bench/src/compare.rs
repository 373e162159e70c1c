//! Two benchmark runs side by side with ratios (`bench compare A.json B.json`).

use crate::report::{BenchReport, RunReport};
use std::fmt::Write as _;

#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    pub metric: &'static str,
    pub a: f64,
    pub b: f64,
    /// `b / a`; `None` when `a` is zero.
    pub ratio: Option<f64>,
}

type Field = (&'static str, fn(&RunReport) -> f64);

const FIELDS: &[Field] = &[
    ("request throughput (req/s)", |r| r.request_throughput),
    ("input tok/s", |r| r.input_token_throughput),
    ("output tok/s", |r| r.output_token_throughput),
    ("goodput (req/s)", |r| r.goodput),
    ("failed requests", |r| r.failed as f64),
    ("TTFT mean (ms)", |r| r.ttft_ms.mean),
    ("TTFT median (ms)", |r| r.ttft_ms.median),
    ("TTFT p99 (ms)", |r| r.ttft_ms.p99),
    ("TPOT median (ms)", |r| r.tpot_ms.median),
    ("TPOT p99 (ms)", |r| r.tpot_ms.p99),
    ("ITL median (ms)", |r| r.itl_ms.median),
    ("ITL p99 (ms)", |r| r.itl_ms.p99),
    ("E2E median (ms)", |r| r.e2e_ms.median),
    ("E2E p99 (ms)", |r| r.e2e_ms.p99),
];

pub fn compare_runs(a: &RunReport, b: &RunReport) -> Vec<CompareRow> {
    FIELDS
        .iter()
        .map(|(metric, field)| {
            let (a, b) = (field(a), field(b));
            CompareRow {
                metric,
                a,
                b,
                ratio: (a != 0.0).then(|| b / a),
            }
        })
        .collect()
}

/// Pairs runs with equal load when both files have them, otherwise by position.
pub fn pair_runs<'a>(
    a: &'a BenchReport,
    b: &'a BenchReport,
) -> Vec<(&'a RunReport, &'a RunReport)> {
    let by_load: Vec<_> = a
        .runs
        .iter()
        .filter_map(|ra| {
            b.runs
                .iter()
                .find(|rb| rb.load == ra.load)
                .map(|rb| (ra, rb))
        })
        .collect();
    if by_load.is_empty() {
        a.runs.iter().zip(&b.runs).collect()
    } else {
        by_load
    }
}

pub fn format_comparison(a: &BenchReport, b: &BenchReport, a_name: &str, b_name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {a_name} ({}, {})", a.model, a.base_url);
    let _ = writeln!(out, "B: {b_name} ({}, {})", b.model, b.base_url);
    for (ra, rb) in pair_runs(a, b) {
        let _ = writeln!(out, "\n==== A: {} | B: {} ====", ra.load, rb.load);
        let _ = writeln!(out, "{:<30}{:>14}{:>14}{:>10}", "metric", "A", "B", "B/A");
        for row in compare_runs(ra, rb) {
            let ratio = row.ratio.map_or("-".into(), |r| format!("{r:.3}"));
            let _ = writeln!(
                out,
                "{:<30}{:>14.2}{:>14.2}{:>10}",
                row.metric, row.a, row.b, ratio
            );
        }
    }
    out
}
