//! The client's latency figures against a server with known delays.
//!
//! Sleeps guarantee lower bounds only, so every check allows the measured value to exceed
//! the configured one by a generous margin (the machine may be busy with other work); the
//! margins are still smaller than the errors they catch (TTFT taken at the response headers
//! would be ~0, TTFT taken at the end of the stream would add 5 x 25 ms of token gaps).

mod common;

use common::{ms, Fixture};
use pagoda_bench::metrics::Summary;
use pagoda_bench::mock_server::MockServerConfig;
use pagoda_bench::record::TokenSource;
use std::time::Duration;

const TTFT_CYCLE_MS: [u64; 5] = [30, 60, 90, 120, 150];
const ITL_MS: f64 = 25.0;
const TOKENS: u32 = 6;

fn known_delays() -> MockServerConfig {
    MockServerConfig {
        ttft_cycle: ms(&TTFT_CYCLE_MS),
        itl: Duration::from_millis(ITL_MS as u64),
        output_tokens: Some(TOKENS),
        ..MockServerConfig::default()
    }
}

/// What the server did to 20 requests: each TTFT of the cycle four times.
fn expected_ttft() -> Summary {
    let samples: Vec<f64> = (0..20).map(|i| TTFT_CYCLE_MS[i % 5] as f64).collect();
    Summary::of(&samples)
}

fn assert_close_above(name: &str, measured: f64, expected: f64, margin_ms: f64) {
    assert!(
        measured >= expected - 1.0 && measured <= expected + margin_ms,
        "{name}: measured {measured:.2} ms, server did {expected:.2} ms (allowed +{margin_ms} ms)"
    );
}

fn check_latencies(report: &pagoda_bench::RunReport) {
    let ttft = expected_ttft();
    assert_eq!(report.ttft_ms.count, 20);
    assert_close_above("TTFT mean", report.ttft_ms.mean, ttft.mean, 60.0);
    assert_close_above("TTFT median", report.ttft_ms.median, ttft.median, 60.0);
    assert_close_above("TTFT p90", report.ttft_ms.p90, ttft.p90, 90.0);
    assert_close_above("TTFT p99", report.ttft_ms.p99, ttft.p99, 120.0);
    // A gap can look shorter than the server's sleep when the previous chunk was delayed
    // in transit, so the lower bound is looser here.
    assert!(
        (ITL_MS - 4.0..ITL_MS + 35.0).contains(&report.itl_ms.median),
        "ITL median {}",
        report.itl_ms.median
    );
    assert_eq!(report.itl_ms.count, 20 * (TOKENS as usize - 1));
    assert!(
        (ITL_MS - 1.0..ITL_MS + 35.0).contains(&report.tpot_ms.median),
        "TPOT median {}",
        report.tpot_ms.median
    );
    let e2e_expected = ttft.median + ITL_MS * f64::from(TOKENS - 1);
    assert_close_above("E2E median", report.e2e_ms.median, e2e_expected, 100.0);
}

#[test]
fn completions_latency_percentiles_match_the_server_delays() {
    let fixture = Fixture::start(known_delays());
    let args = fixture.serve_args(&["--concurrency", "5", "--num-requests", "20", "--no-plots"]);
    let report = pagoda_bench::serve::serve(args).unwrap();
    let run = &report.runs[0];
    assert_eq!((run.requests, run.completed, run.failed), (20, 20, 0));
    check_latencies(run);
    assert_eq!(run.total_output_tokens, 20 * u64::from(TOKENS));
    assert_eq!(run.output_token_sources.get(&TokenSource::Usage), Some(&20));
    // The mock counts prompt words; the random workload sends 8 words per prompt.
    assert_eq!(run.total_input_tokens, 20 * 8);
}

#[test]
fn chat_latency_percentiles_match_the_server_delays() {
    let fixture = Fixture::start(known_delays());
    let args = fixture.serve_args(&[
        "--endpoint",
        "chat",
        "--concurrency",
        "5",
        "--num-requests",
        "20",
        "--no-plots",
    ]);
    let report = pagoda_bench::serve::serve(args).unwrap();
    check_latencies(&report.runs[0]);
}

#[test]
fn without_usage_output_tokens_are_counted_from_chunks() {
    let fixture = Fixture::start(MockServerConfig {
        send_usage: false,
        output_tokens: Some(5),
        ..MockServerConfig::default()
    });
    let args = fixture.serve_args(&["--num-requests", "10", "--no-plots"]);
    let run = &pagoda_bench::serve::serve(args).unwrap().runs[0];
    assert_eq!(run.total_output_tokens, 50);
    assert_eq!(
        run.output_token_sources.get(&TokenSource::Estimate),
        Some(&10)
    );
}

#[test]
fn without_usage_a_tokenizer_counts_output_tokens() {
    // A word-level tokenizer: the mock's " tok" chunks are one token each.
    let tokenizer_json = r#"{
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"tok": 0, "[UNK]": 1}, "unk_token": "[UNK]"}
    }"#;
    let fixture = Fixture::start(MockServerConfig {
        send_usage: false,
        output_tokens: Some(7),
        ..MockServerConfig::default()
    });
    let tokenizer = fixture.out_dir.path().join("tokenizer.json");
    std::fs::write(&tokenizer, tokenizer_json).unwrap();
    let tokenizer = tokenizer.display().to_string();
    let args = fixture.serve_args(&[
        "--num-requests",
        "4",
        "--no-plots",
        "--tokenizer",
        &tokenizer,
    ]);
    let run = &pagoda_bench::serve::serve(args).unwrap().runs[0];
    assert_eq!(run.total_output_tokens, 28);
    assert_eq!(
        run.output_token_sources.get(&TokenSource::Tokenizer),
        Some(&4)
    );
    assert_eq!(
        run.input_token_sources.get(&TokenSource::Tokenizer),
        Some(&4)
    );
}
