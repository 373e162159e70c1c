//! `pagoda bench` reports as console tables: `bench serve` levels (throughput, goodput,
//! failures, latency percentiles), a `bench profile`, and a goodput search.

use pagoda_bench::goodput_profile::GoodputSearchReport;
use pagoda_bench::metrics::Summary;
use pagoda_bench::profile_format::Profile;
use pagoda_bench::BenchReport;

use super::html::{escape, num, table};

/// The run's setting as a short definition list.
pub fn facts(items: &[(&str, String)]) -> String {
    let mut out = String::from("<dl class=\"facts\">");
    for (name, value) in items {
        out.push_str(&format!(
            "<dt>{}</dt><dd>{}</dd>",
            escape(name),
            escape(value)
        ));
    }
    out.push_str("</dl>");
    out
}

fn p50_p90_p99(s: &Summary) -> [String; 3] {
    [num(s.median, 1), num(s.p90, 1), num(s.p99, 1)]
}

pub fn bench(r: &BenchReport) -> String {
    let mut out = facts(&[
        ("model", r.model.clone()),
        ("endpoint", format!("{} ({})", r.base_url, r.endpoint)),
        ("workload", r.workload.clone()),
        ("tool", r.tool.clone()),
    ]);
    let throughput: Vec<Vec<String>> = r
        .runs
        .iter()
        .map(|run| {
            vec![
                escape(&run.load.to_string()),
                run.requests.to_string(),
                run.completed.to_string(),
                run.failed.to_string(),
                num(run.duration_s, 2),
                num(run.request_throughput, 2),
                num(run.goodput, 2),
                num(run.input_token_throughput, 1),
                num(run.output_token_throughput, 1),
            ]
        })
        .collect();
    out.push_str("<h2>Throughput</h2>");
    out.push_str(&table(
        "bench-throughput",
        &[
            "load",
            "requests",
            "completed",
            "failed",
            "duration (s)",
            "req/s",
            "goodput (req/s)",
            "input tok/s",
            "output tok/s",
        ],
        &throughput,
    ));
    let mut latency = Vec::new();
    for run in &r.runs {
        for (name, s) in [
            ("TTFT", &run.ttft_ms),
            ("TPOT", &run.tpot_ms),
            ("ITL", &run.itl_ms),
            ("E2E", &run.e2e_ms),
        ] {
            let [p50, p90, p99] = p50_p90_p99(s);
            latency.push(vec![
                escape(&run.load.to_string()),
                name.to_string(),
                num(s.mean, 1),
                p50,
                p90,
                p99,
                num(s.max, 1),
            ]);
        }
    }
    out.push_str("<h2>Latency (ms, completed requests)</h2>");
    out.push_str(&table(
        "bench-latency",
        &["load", "metric", "mean", "p50", "p90", "p99", "max"],
        &latency,
    ));
    let failures: Vec<Vec<String>> = r
        .runs
        .iter()
        .flat_map(|run| {
            run.errors_by_kind.iter().map(|(kind, n)| {
                let example = run.error_examples.get(kind).map_or("", String::as_str);
                vec![
                    escape(&run.load.to_string()),
                    escape(kind),
                    n.to_string(),
                    escape(example),
                ]
            })
        })
        .collect();
    if !failures.is_empty() {
        out.push_str("<h2>Failures</h2>");
        out.push_str(&table(
            "bench-failures",
            &["load", "kind", "requests", "first message"],
            &failures,
        ));
    }
    out
}

pub fn profile(p: &Profile) -> String {
    let mut out = facts(&[
        ("model", p.model.clone()),
        ("endpoint", p.base_url.clone()),
        (
            "saturated prefill",
            format!("{} prompt tokens/s", num(p.prefill_tps, 1)),
        ),
        (
            "saturated decode",
            format!("{} output tokens/s", num(p.decode_tps, 1)),
        ),
        (
            "mixed workload",
            format!("{} prompt / {} output tokens", p.input_len, p.output_len),
        ),
        ("tool", p.tool.clone()),
    ]);
    let rows: Vec<Vec<String>> = p
        .loads
        .iter()
        .map(|l| {
            let [t50, t90, t99] = p50_p90_p99(&l.ttft_ms);
            let [i50, i90, i99] = p50_p90_p99(&l.itl_ms);
            vec![
                l.concurrency.to_string(),
                num(l.request_throughput, 2),
                num(l.input_token_throughput, 1),
                num(l.output_token_throughput, 1),
                l.failed.to_string(),
                t50,
                t90,
                t99,
                i50,
                i90,
                i99,
            ]
        })
        .collect();
    out.push_str("<h2>Loads</h2>");
    out.push_str(&table(
        "profile-loads",
        &[
            "concurrency",
            "req/s",
            "input tok/s",
            "output tok/s",
            "failed",
            "TTFT p50",
            "TTFT p90",
            "TTFT p99",
            "ITL p50",
            "ITL p90",
            "ITL p99",
        ],
        &rows,
    ));
    out
}

pub fn goodput(g: &GoodputSearchReport) -> String {
    let s = &g.search;
    let a = &g.answer;
    let answer = match a.lowest_missed_rate {
        Some(missed) => format!(
            "{} req/s (goodput {} req/s); lowest rate missing it {} req/s",
            num(a.max_rate, 2),
            num(a.goodput, 2),
            num(missed, 2)
        ),
        None => format!(
            "at least {} req/s (goodput {} req/s); no rate tried missed it",
            num(a.max_rate, 2),
            num(a.goodput, 2)
        ),
    };
    let mut out = facts(&[
        ("model", g.model.clone()),
        ("endpoint", g.base_url.clone()),
        (
            "SLO",
            format!(
                "TTFT <= {} ms and ITL <= {} ms for {}% of requests",
                num(s.slo_ttft_ms, 1),
                num(s.slo_itl_ms, 1),
                num(s.attainment * 100.0, 0)
            ),
        ),
        ("max rate meeting the SLO", answer),
        (
            "workload",
            format!(
                "{} prompt / {} output tokens, {} requests per rate",
                g.input_len, g.output_len, g.num_requests
            ),
        ),
        ("tool", g.tool.clone()),
    ]);
    let rows: Vec<Vec<String>> = g
        .points
        .iter()
        .map(|p| {
            let run = &p.run;
            vec![
                num(p.rate, 2),
                num(run.request_throughput, 2),
                num(run.output_token_throughput, 1),
                format!("{}%", num(p.attainment * 100.0, 1)),
                (if p.meets_slo { "met" } else { "missed" }).to_string(),
                num(run.ttft_ms.median, 1),
                num(run.ttft_ms.p99, 1),
                num(run.tpot_ms.median, 2),
                num(run.tpot_ms.p99, 2),
                num(run.goodput, 2),
            ]
        })
        .collect();
    out.push_str("<h2>Rates measured</h2>");
    out.push_str(&table(
        "goodput-points",
        &[
            "rate (req/s)",
            "achieved req/s",
            "output tok/s",
            "attainment",
            "SLO",
            "TTFT p50",
            "TTFT p99",
            "ITL p50",
            "ITL p99",
            "goodput",
        ],
        &rows,
    ));
    out
}
