//! `bench profile --slo-ttft-ms --slo-itl-ms` against a mock whose latency grows with the
//! requests in flight, so the SLO is met at low rates and missed at high ones.

mod common;

use common::Fixture;
use pagoda_bench::goodput_profile::{self, GoodputSearchReport};
use pagoda_bench::goodput_search::SearchConfig;
use pagoda_bench::mock_server::MockServerConfig;
use pagoda_bench::BenchError;
use std::time::Duration;

/// Alone a request takes about 4 ms; each other request in flight adds 8 ms to its TTFT
/// and 2 ms to each token gap, so the SLO below (TTFT <= 50 ms, ITL <= 15 ms) holds while
/// about five or fewer are in flight. With these lengths it stops holding for 90% of the
/// requests near 100 req/s; at 200 req/s the 26 requests of a rate pile up well past it.
fn load_dependent() -> MockServerConfig {
    MockServerConfig {
        ttft_cycle: vec![Duration::from_millis(2)],
        itl: Duration::from_millis(1),
        ttft_per_in_flight: Duration::from_millis(8),
        itl_per_in_flight: Duration::from_millis(2),
        ..MockServerConfig::default()
    }
}

const SEARCH: &[&str] = &[
    "--input-len",
    "8",
    "--output-len",
    "3",
    "--num-requests",
    "24",
    "--warmup",
    "0",
    "--warmup-requests",
    "2",
    "--slo-ttft-ms",
    "50",
    "--slo-itl-ms",
    "15",
    "--rate-min",
    "20",
    "--rate-max",
    "200",
    "--search-steps",
    "3",
];

#[test]
fn search_finds_a_rate_that_meets_the_slo_below_one_that_misses_it() {
    let fixture = Fixture::start(load_dependent());
    let args = fixture.profile_args(SEARCH);
    let config = SearchConfig::from_args(&args).unwrap().unwrap();
    let report = goodput_profile::run(&args, &config).unwrap();

    let answer = &report.answer;
    let best = report
        .points
        .iter()
        .find(|p| p.rate == answer.max_rate)
        .expect("the answer is a measured rate");
    assert!(best.meets_slo && best.attainment >= 0.9, "{answer:?}");
    assert_eq!(answer.goodput, best.run.goodput);
    // --rate-max (200) must have been measured and missed, well above the answer.
    let missed_high = report
        .points
        .iter()
        .any(|p| !p.meets_slo && p.rate >= 1.5 * answer.max_rate);
    assert!(missed_high, "{:?}", summary(&report));
    let lowest_missed = answer.lowest_missed_rate.expect("a rate missed the SLO");
    assert!(lowest_missed > answer.max_rate);
    // Lowest rate, --rate-max, three bisections; all kept, in increasing rate.
    assert_eq!(report.points.len(), 5, "{:?}", summary(&report));
    assert!(report.points.windows(2).all(|w| w[0].rate < w[1].rate));
    for point in &report.points {
        assert_eq!(point.meets_slo, point.attainment >= 0.9);
        assert_eq!(point.attainment, point.run.slo_attainment());
    }
    // The mock's latency grows with load, which is what the search measured.
    let (low, high) = (&report.points[0].run, &report.points[4].run);
    assert!(high.ttft_ms.p99 > low.ttft_ms.p99, "{:?}", summary(&report));

    // --warmup-requests: sent at every rate, left out of its figures.
    for point in &report.points {
        assert_eq!(point.run.requests, 24);
    }
    assert_eq!(fixture.server.requests_received(), 5 * (24 + 2));

    let json = std::fs::read_to_string(fixture.out_dir.path().join("goodput_search.json")).unwrap();
    let written: GoodputSearchReport = serde_json::from_str(&json).unwrap();
    // Floats may differ in the last digit after a JSON round trip; compare what is exact.
    assert_eq!(written.answer.max_rate, answer.max_rate);
    assert_eq!(written.answer.lowest_missed_rate, answer.lowest_missed_rate);
    let verdicts = |r: &GoodputSearchReport| -> Vec<(f64, bool, u64)> {
        r.points
            .iter()
            .map(|p| (p.rate, p.meets_slo, p.run.good_requests))
            .collect()
    };
    assert_eq!(verdicts(&written), verdicts(&report));
    let svg = std::fs::read_to_string(fixture.out_dir.path().join("goodput_search.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("SLO attainment"));
}

fn summary(report: &GoodputSearchReport) -> Vec<(f64, f64, f64)> {
    report
        .points
        .iter()
        .map(|p| (p.rate, p.attainment, p.run.ttft_ms.p99))
        .collect()
}

#[test]
fn missing_the_slo_at_the_lowest_rate_fails_the_command() {
    let fixture = Fixture::start(MockServerConfig {
        ttft_cycle: vec![Duration::from_millis(80)],
        ..MockServerConfig::default()
    });
    let args = fixture.profile_args(&[
        "--input-len",
        "8",
        "--output-len",
        "2",
        "--num-requests",
        "4",
        "--warmup",
        "0",
        "--slo-ttft-ms",
        "40",
        "--slo-itl-ms",
        "100",
        "--rate-min",
        "50",
        "--no-plots",
    ]);
    let error = pagoda_bench::run_profile(args).unwrap_err();
    assert!(
        matches!(error, BenchError::GoodputUnreachable { rate, attainment, .. }
            if rate == 50.0 && attainment == 0.0),
        "{error}"
    );
    assert_eq!(
        fixture.server.requests_received(),
        4,
        "only the lowest rate"
    );
    assert!(!fixture.out_dir.path().join("goodput_search.json").exists());
}

#[test]
fn one_slo_flag_alone_is_refused_before_sending() {
    let fixture = Fixture::start(MockServerConfig::default());
    let error =
        pagoda_bench::run_profile(fixture.profile_args(&["--slo-itl-ms", "30"])).unwrap_err();
    assert!(matches!(error, BenchError::InvalidArgument(_)), "{error}");
    assert!(error.to_string().contains("--slo-ttft-ms"), "{error}");
    let error =
        pagoda_bench::profile::profile(fixture.profile_args(&["--slo-ttft-ms", "30"])).unwrap_err();
    assert!(error.to_string().contains("--slo-itl-ms"), "{error}");
    assert_eq!(fixture.server.requests_received(), 0);
}
