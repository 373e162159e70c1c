//! Workloads, arrival modes and the files a run leaves behind.

mod common;

use common::Fixture;
use pagoda_bench::arrivals::Load;
use pagoda_bench::mock_server::MockServerConfig;
use pagoda_bench::BenchReport;
use std::time::Duration;

#[test]
fn sweep_writes_json_cdf_and_sweep_plots() {
    let fixture = Fixture::start(MockServerConfig::default());
    let args = fixture.serve_args(&["--concurrency", "1,4", "--num-requests", "8"]);
    let report = pagoda_bench::serve::serve(args).unwrap();
    let loads: Vec<Load> = report.runs.iter().map(|r| r.load).collect();
    assert_eq!(loads, vec![Load::Concurrency(1), Load::Concurrency(4)]);

    let dir = fixture.out_dir.path();
    let saved = BenchReport::read(&dir.join("bench.json")).unwrap();
    assert_eq!(saved.runs.len(), 2);
    for (saved, run) in saved.runs.iter().zip(&report.runs) {
        assert_eq!(
            (saved.load, saved.requests, saved.completed),
            (run.load, 8, 8)
        );
        // Floats survive the JSON round trip up to the last bit or so.
        assert!((saved.ttft_ms.p99 - run.ttft_ms.p99).abs() < 1e-9);
    }
    // One line per measured request, in send order within each level.
    let lines: Vec<pagoda_bench::record::RequestLine> =
        std::fs::read_to_string(dir.join("requests.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(lines.len(), 16);
    assert_eq!(lines[0].level, "concurrency 1");
    assert_eq!(lines[8].level, "concurrency 4");
    for level in lines.chunks(8) {
        assert!(level.windows(2).all(|w| w[0].sent_s <= w[1].sent_s));
        assert!(level.iter().all(|l| l.error.is_none()
            && l.ttft_ms.unwrap() > 0.0
            && l.e2e_ms.unwrap() >= l.ttft_ms.unwrap()));
    }
    for plot in ["latency_cdf.svg", "sweep.svg"] {
        let svg = std::fs::read_to_string(dir.join(plot)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("polyline"), "{plot}");
    }
}

#[test]
fn poisson_arrivals_send_the_requested_count() {
    let fixture = Fixture::start(MockServerConfig::default());
    let args = fixture.serve_args(&[
        "--request-rate",
        "200",
        "--num-requests",
        "30",
        "--no-plots",
    ]);
    let run = pagoda_bench::serve::serve(args).unwrap().runs.remove(0);
    assert_eq!(run.load, Load::PoissonRate(200.0));
    assert_eq!((run.requests, run.completed), (30, 30));
    assert_eq!(fixture.server.requests_received(), 30);
}

#[test]
fn duration_bound_run_stops_sending_after_the_duration() {
    let fixture = Fixture::start(MockServerConfig {
        ttft_cycle: vec![Duration::from_millis(50)],
        output_tokens: Some(2),
        ..MockServerConfig::default()
    });
    let args = fixture.serve_args(&["--concurrency", "2", "--duration-s", "0.5", "--no-plots"]);
    let run = pagoda_bench::serve::serve(args).unwrap().runs.remove(0);
    // At most 2 in flight for ~50 ms each over 0.5 s: about 20 requests, never more
    // than 2 * (0.5 / 0.05) + 2.
    assert!(run.requests >= 2 && run.requests <= 22, "{}", run.requests);
    assert_eq!(run.failed, 0);
    assert!(run.duration_s >= 0.5);
}

#[test]
fn multi_turn_conversations_resend_the_history() {
    let fixture = Fixture::start(MockServerConfig::default());
    let single = fixture.serve_args(&[
        "--concurrency",
        "1",
        "--num-requests",
        "6",
        "--output-len",
        "4",
        "--no-plots",
    ]);
    let single = pagoda_bench::serve::serve(single).unwrap().runs.remove(0);
    let multi = fixture.serve_args(&[
        "--workload",
        "multi-turn",
        "--turns",
        "3",
        "--concurrency",
        "1",
        "--num-requests",
        "6",
        "--output-len",
        "4",
        "--no-plots",
    ]);
    let multi = pagoda_bench::serve::serve(multi).unwrap().runs.remove(0);
    assert_eq!(multi.requests, 6);
    assert_eq!(single.total_input_tokens, 6 * 8);
    // Turn 2 carries turn 1 and its 4-token reply, turn 3 carries both earlier turns.
    assert!(
        multi.total_input_tokens > 2 * single.total_input_tokens,
        "{} vs {}",
        multi.total_input_tokens,
        single.total_input_tokens
    );
}

#[test]
fn shared_prefix_and_sharegpt_workloads_run() {
    let fixture = Fixture::start(MockServerConfig::default());
    let shared = fixture.serve_args(&[
        "--workload",
        "shared-prefix",
        "--num-prefixes",
        "2",
        "--prefix-fraction",
        "0.5",
        "--num-requests",
        "6",
        "--no-plots",
    ]);
    assert_eq!(
        pagoda_bench::serve::serve(shared).unwrap().runs[0].completed,
        6
    );

    let dataset = fixture.out_dir.path().join("sharegpt.json");
    std::fs::write(
        &dataset,
        r#"[{"conversations": [{"from": "human", "value": "one two three"},
                               {"from": "gpt", "value": "a b c d e"}]}]"#,
    )
    .unwrap();
    let dataset = dataset.display().to_string();
    let sharegpt = fixture.serve_args(&[
        "--workload",
        "sharegpt",
        "--dataset",
        &dataset,
        "--num-requests",
        "3",
        "--no-plots",
    ]);
    let run = pagoda_bench::serve::serve(sharegpt).unwrap().runs.remove(0);
    // max_tokens follows the reply length (5 words); the mock honours it.
    assert_eq!(run.total_output_tokens, 15);
    assert_eq!(run.total_input_tokens, 9);
}
