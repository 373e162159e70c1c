//! Failed requests are counted by kind and kept in the figures; warm-up is left out;
//! goodput counts only requests that met the SLO.

mod common;

use common::{ms, Fixture};
use pagoda_bench::mock_server::{FailureRule, MockServerConfig};
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn failures_are_counted_by_status_and_never_dropped() {
    let rules = vec![
        FailureRule {
            every: 4,
            status: 429,
        },
        FailureRule {
            every: 10,
            status: 500,
        },
    ];
    let fixture = Fixture::start(MockServerConfig {
        failures: rules.clone(),
        output_tokens: Some(3),
        ..MockServerConfig::default()
    });
    let args = fixture.serve_args(&["--concurrency", "3", "--num-requests", "40", "--no-plots"]);
    let run = pagoda_bench::serve::serve(args).unwrap().runs.remove(0);

    // Requests 4, 8, ..., 40 get 429; 10 and 30 get 500 (20 and 40 matched 429 first).
    let mut expected = BTreeMap::new();
    for n in 1..=40u64 {
        if let Some(rule) = rules.iter().find(|r| n.is_multiple_of(r.every)) {
            *expected.entry(format!("http_{}", rule.status)).or_insert(0) += 1;
        }
    }
    assert_eq!(expected.get("http_429"), Some(&10));
    assert_eq!(expected.get("http_500"), Some(&2));
    assert_eq!(run.errors_by_kind, expected);
    assert_eq!(run.requests, 40);
    assert_eq!((run.completed, run.failed), (28, 12));
    assert_eq!(
        run.good_requests, 28,
        "no SLO: every completed request is good"
    );
    assert!(run.error_examples["http_429"].contains("mock failure"));
    // Only completed requests contribute latency samples, and the count says so.
    assert_eq!(run.ttft_ms.count, 28);
}

#[test]
fn every_request_failing_is_an_error_of_the_command() {
    let fixture = Fixture::start(MockServerConfig {
        failures: vec![FailureRule {
            every: 1,
            status: 503,
        }],
        ..MockServerConfig::default()
    });
    let args = fixture.serve_args(&["--num-requests", "5", "--no-plots"]);
    let error = pagoda_bench::run_serve(args).unwrap_err();
    assert!(
        matches!(
            error,
            pagoda_bench::BenchError::AllRequestsFailed {
                sent: 5,
                failed: 5,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn unreachable_server_counts_as_connect_failures() {
    // Bind and drop a listener to get a local port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let fixture = Fixture::start(MockServerConfig::default());
    let mut args = fixture.serve_args(&["--num-requests", "3", "--no-plots"]);
    args.endpoint.base_url = format!("http://127.0.0.1:{port}");
    let run = pagoda_bench::serve::serve(args).unwrap().runs.remove(0);
    assert_eq!(run.errors_by_kind.get("connect"), Some(&3));
}

#[test]
fn warmup_requests_are_sent_but_left_out_of_the_figures() {
    let fixture = Fixture::start(MockServerConfig::default());
    let args = fixture.serve_args(&[
        "--concurrency",
        "2",
        "--warmup",
        "3",
        "--num-requests",
        "10",
        "--no-plots",
    ]);
    let run = pagoda_bench::serve::serve(args).unwrap().runs.remove(0);
    assert_eq!(run.requests, 10);
    assert_eq!(run.ttft_ms.count, 10);
    assert_eq!(fixture.server.requests_received(), 13);
}

#[test]
fn goodput_counts_requests_within_the_ttft_slo() {
    // Half the requests start after 10 ms, half after 250 ms; the SLO is 120 ms.
    let fixture = Fixture::start(MockServerConfig {
        ttft_cycle: ms(&[10, 250]),
        output_tokens: Some(2),
        ..MockServerConfig::default()
    });
    let args = fixture.serve_args(&[
        "--concurrency",
        "2",
        "--num-requests",
        "10",
        "--slo-ttft-ms",
        "120",
        "--no-plots",
    ]);
    let run = pagoda_bench::serve::serve(args).unwrap().runs.remove(0);
    assert_eq!(run.good_requests, 5);
    assert!((run.goodput - 5.0 / run.duration_s).abs() < 1e-9);
}

#[test]
fn goodput_counts_requests_within_the_tpot_slo() {
    let fixture = Fixture::start(MockServerConfig {
        itl: Duration::from_millis(40),
        output_tokens: Some(3),
        ..MockServerConfig::default()
    });
    let strict = fixture.serve_args(&["--num-requests", "4", "--slo-tpot-ms", "10", "--no-plots"]);
    assert_eq!(
        pagoda_bench::serve::serve(strict).unwrap().runs[0].good_requests,
        0
    );
    let loose = fixture.serve_args(&["--num-requests", "4", "--slo-tpot-ms", "5000", "--no-plots"]);
    assert_eq!(
        pagoda_bench::serve::serve(loose).unwrap().runs[0].good_requests,
        4
    );
}
