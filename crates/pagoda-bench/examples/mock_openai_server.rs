//! Serves the mock OpenAI-compatible streaming endpoint on 127.0.0.1, to try the bench
//! commands without a model:
//!
//! cargo run -p pagoda-bench --example mock_openai_server -- --ttft-ms 50 --itl-ms 10
//! cargo run -p pagoda -- bench serve --base-url http://127.0.0.1:PORT

use clap::Parser;
use pagoda_bench::mock_server::{FailureRule, MockServer, MockServerConfig};
use std::time::Duration;

#[derive(Parser)]
struct Args {
    /// Delay before the first token.
    #[arg(long, default_value_t = 0)]
    ttft_ms: u64,
    /// Delay between tokens.
    #[arg(long, default_value_t = 0)]
    itl_ms: u64,
    /// Answer every N-th request with HTTP 429.
    #[arg(long)]
    fail_every: Option<u64>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let config = MockServerConfig {
        ttft_cycle: vec![Duration::from_millis(args.ttft_ms)],
        itl: Duration::from_millis(args.itl_ms),
        failures: args
            .fail_every
            .map(|every| FailureRule { every, status: 429 })
            .into_iter()
            .collect(),
        ..MockServerConfig::default()
    };
    let server = MockServer::start(config).await.expect("mock server starts");
    println!("listening on {}", server.base_url());
    // Serve until interrupted.
    std::future::pending::<()>().await;
}
