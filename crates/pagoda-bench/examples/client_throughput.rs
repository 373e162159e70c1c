//! Shows the client is not the bottleneck: streamed requests per second against a local
//! endpoint that answers at once.
//!
//! cargo run --release -p pagoda-bench --example client_throughput [-- REQUESTS [CONCURRENCY,...] [--frame-per-event]]
//!
//! The mock server runs in this process on its own single-threaded runtime, so client and
//! server share the machine's cores; the figure is a lower bound for the client alone.
//! By default each reply (8 token events, usage, `[DONE]`) goes out in one write;
//! `--frame-per-event` sends every event as its own HTTP chunk.

use clap::Parser;
use pagoda_bench::cli::ServeArgs;
use pagoda_bench::mock_server::{MockServer, MockServerConfig};

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    serve: ServeArgs,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let requests: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(40_000);
    let concurrency = args.next().unwrap_or_else(|| "16,64".to_owned());
    let frame_per_event = args.next().as_deref() == Some("--frame-per-event");

    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("server runtime");
        runtime.block_on(async {
            let config = MockServerConfig {
                output_tokens: Some(8),
                frame_per_event,
                ..MockServerConfig::default()
            };
            let server = MockServer::start(config).await.expect("mock server");
            ready_tx.send(server.base_url()).expect("main thread waits");
            std::future::pending::<()>().await;
            drop(server);
        });
    });
    let base_url = ready_rx.recv().expect("server started");
    let out_dir = std::env::temp_dir().join("pagoda-client-throughput");
    let requests = requests.to_string();
    let out_dir = out_dir.display().to_string();
    let serve = Wrapper::parse_from([
        "client_throughput",
        "--base-url",
        &base_url,
        "--input-len",
        "16",
        "--output-len",
        "8",
        "--concurrency",
        &concurrency,
        "--num-requests",
        &requests,
        "--warmup",
        "1000",
        "--no-plots",
        "--no-progress",
        "--out-dir",
        &out_dir,
    ])
    .serve;
    let report = pagoda_bench::serve::serve(serve).expect("benchmark ran");
    let framing = if frame_per_event {
        "one HTTP chunk per event"
    } else {
        "one write per reply"
    };
    for run in &report.runs {
        println!(
            "{}: {:.0} streamed requests/s ({} ok, {} failed; 8 tokens per reply, {framing})",
            run.load, run.request_throughput, run.completed, run.failed
        );
    }
}
