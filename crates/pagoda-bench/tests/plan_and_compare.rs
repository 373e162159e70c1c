//! `pagoda plan` from flags and from a profile file, and `bench compare` ratios.

mod common;

use common::plan_args;
use pagoda_bench::arrivals::Load;
use pagoda_bench::compare::{compare_runs, pair_runs};
use pagoda_bench::metrics::Summary;
use pagoda_bench::plan::Constraint;
use pagoda_bench::plan_command;
use pagoda_bench::plan_report::PlanReport;
use pagoda_bench::profile_format::{Profile, ProfileLoad};
use pagoda_bench::report::Slo;
use pagoda_bench::{BenchReport, RunReport};
use rust_decimal::Decimal;
use std::collections::BTreeMap;

const PUBLISHED_EXAMPLE: &[&str] = &[
    "--qps",
    "1000",
    "--input",
    "2000",
    "--output",
    "500",
    "--cache-hit",
    "0.4",
    "--prefill-tps",
    "12000",
    "--decode-tps",
    "2400",
    "--headroom",
    "1.8",
    "--accelerator-hour-usd",
    "2.0",
];

#[test]
fn plan_flags_reproduce_the_published_example() {
    let plan = plan_command::run(&plan_args(PUBLISHED_EXAMPLE)).unwrap();
    assert_eq!(plan.prefill.accelerators, 180);
    assert_eq!(plan.decode.accelerators, 375);
    assert_eq!(
        plan.disaggregated_cost.per_million_input_usd,
        "0.05".parse::<Decimal>().unwrap()
    );
}

fn flat(value: f64) -> Summary {
    Summary {
        count: 10,
        mean: value,
        median: value,
        p90: value,
        p99: value,
        min: value,
        max: value,
    }
}

fn profile_with_loads() -> Profile {
    let load = |concurrency, ttft, itl, input_tps, output_tps| ProfileLoad {
        concurrency,
        request_throughput: output_tps / 500.0,
        input_token_throughput: input_tps,
        output_token_throughput: output_tps,
        failed: 0,
        ttft_ms: flat(ttft),
        itl_ms: flat(itl),
        tpot_ms: flat(itl),
    };
    Profile {
        tool: "test".into(),
        base_url: "http://127.0.0.1:1".into(),
        model: "m".into(),
        prefill_tps: 12000.0,
        decode_tps: 2400.0,
        input_len: 2000,
        output_len: 500,
        loads: vec![
            load(8, 120.0, 18.0, 8000.0, 1000.0),
            load(64, 900.0, 45.0, 11500.0, 2300.0),
        ],
    }
}

#[test]
fn plan_from_a_profile_reports_the_binding_slo() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profile.json");
    profile_with_loads().write(&path).unwrap();
    let path = path.display().to_string();
    let args = plan_args(&[
        "--profile",
        &path,
        "--qps",
        "1000",
        "--input",
        "2000",
        "--output",
        "500",
        "--cache-hit",
        "0.4",
        "--slo-ttft-ms",
        "300",
        "--slo-itl-ms",
        "30",
    ]);
    let plan = plan_command::run(&args).unwrap();
    // Only concurrency 8 meets both targets: 1.2M / 8000 = 150 < 180 prefill replicas,
    // but 500k / 1000 = 500 > 375 decode replicas.
    assert_eq!(plan.prefill.replicas, 180);
    assert_eq!(plan.prefill.binds, Constraint::PrefillThroughput);
    assert_eq!(plan.decode.replicas, 500);
    assert_eq!(plan.decode.binds, Constraint::ItlSlo);
    assert_eq!(plan.slo_load_concurrency, Some(8));
}

#[test]
fn plan_out_writes_the_plan_with_its_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.json");
    profile_with_loads().write(&profile).unwrap();
    let out = dir.path().join("plan.json");
    let (profile, out_flag) = (profile.display().to_string(), out.display().to_string());
    let mut flags = vec!["--profile", &profile, "--out", &out_flag];
    flags.extend_from_slice(&["--qps", "1000", "--input", "2000", "--output", "500"]);
    flags.extend_from_slice(&["--cache-hit", "0.4", "--slo-itl-ms", "30"]);
    let plan = plan_command::run(&plan_args(&flags)).unwrap();
    let saved = PlanReport::read(&out).unwrap();
    assert_eq!(saved.plan, plan);
    assert_eq!(saved.qps, Decimal::from(1000));
    assert_eq!(saved.cache_hit, "0.4".parse::<Decimal>().unwrap());
    assert_eq!(saved.prefill_tps, Decimal::from(12000));
    assert_eq!(saved.profile.as_deref(), Some(profile.as_str()));
    let slo = saved.slo.unwrap();
    assert_eq!(
        (slo.ttft_ms, slo.itl_ms, slo.percentile),
        (None, Some(30.0), 90)
    );
    assert!(saved.tool.starts_with("pagoda-bench") && saved.tool.ends_with("plan"));
    // Money and sizes travel as the exact decimals the planner computed.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\"per_hour_usd\": \""), "{text}");
}

#[test]
fn plan_rejects_missing_throughput_and_bad_cache_hit() {
    assert!(
        plan_command::run(&plan_args(&["--qps", "1", "--input", "1", "--output", "1"])).is_err()
    );
    let flags: Vec<&str> = PUBLISHED_EXAMPLE
        .iter()
        .map(|&flag| if flag == "0.4" { "1.5" } else { flag })
        .collect();
    assert!(plan_command::run(&plan_args(&flags)).is_err());
}

fn run_report(load: Load, throughput: f64, ttft_median: f64) -> RunReport {
    RunReport {
        load,
        duration_s: 10.0,
        requests: 100,
        completed: 100,
        failed: 0,
        errors_by_kind: BTreeMap::new(),
        error_examples: BTreeMap::new(),
        request_throughput: throughput,
        input_token_throughput: throughput * 100.0,
        output_token_throughput: throughput * 10.0,
        total_input_tokens: 0,
        total_output_tokens: 0,
        slo: Slo::default(),
        good_requests: 100,
        goodput: throughput,
        input_token_sources: BTreeMap::new(),
        output_token_sources: BTreeMap::new(),
        ttft_ms: flat(ttft_median),
        tpot_ms: flat(10.0),
        itl_ms: flat(10.0),
        e2e_ms: flat(100.0),
    }
}

#[test]
fn compare_reports_ratios_b_over_a() {
    let rows = compare_runs(
        &run_report(Load::Concurrency(4), 10.0, 50.0),
        &run_report(Load::Concurrency(4), 25.0, 40.0),
    );
    let row = |name: &str| rows.iter().find(|r| r.metric == name).unwrap().clone();
    assert_eq!(row("request throughput (req/s)").ratio, Some(2.5));
    assert_eq!(row("TTFT median (ms)").ratio, Some(0.8));
    assert_eq!(
        row("failed requests").ratio,
        None,
        "0 failures in A: no ratio"
    );
}

#[test]
fn compare_pairs_runs_by_load() {
    let report = |loads: &[u32]| BenchReport {
        tool: "t".into(),
        base_url: "u".into(),
        model: "m".into(),
        endpoint: "completions".into(),
        workload: "w".into(),
        runs: loads
            .iter()
            .map(|&c| run_report(Load::Concurrency(c), f64::from(c), 1.0))
            .collect(),
    };
    let a = report(&[1, 4, 16]);
    let b = report(&[4, 16]);
    let pairs = pair_runs(&a, &b);
    let loads: Vec<(Load, Load)> = pairs.iter().map(|(x, y)| (x.load, y.load)).collect();
    assert_eq!(
        loads,
        vec![
            (Load::Concurrency(4), Load::Concurrency(4)),
            (Load::Concurrency(16), Load::Concurrency(16))
        ]
    );
}
