//! The gateway's own latency per request, in process: authenticate, admit (caps, rates,
//! concurrency, budget reservation), meter one output token, settle and wait for the cost
//! event's durable commit to SQLite, which is everything the gateway adds to a request's
//! path. Requests arrive at a fixed rate (default 1,000/s) and overlap as they would in a
//! server.
//!
//! cargo run --release -p pagoda-gateway --example gateway_overhead -- [RATE] [SECONDS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use pagoda_gateway::{ChoiceEnd, Gateway, GatewayConfig, PlannedPrompt, TenantId};

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let rate: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000.0);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("gw.toml");
    std::fs::write(
        &policy,
        "[pricing.m]\ninput = \"0.50\"\ncached_input = \"0.05\"\noutput = \"1.50\"\n\
         [defaults]\nrequests_per_minute = 10000000\ntokens_per_minute = 1000000000\n\
         max_concurrent = 100000\nmax_tokens = 64\n\
         budget = { daily = \"1000000\", monthly = \"10000000\" }\n",
    )
    .unwrap();
    let mut config = GatewayConfig::new(dir.path().join("gw.db"));
    config.policy = Some(policy);
    let gateway = Gateway::open(config).await.unwrap();
    let keys: Vec<String> = (0..8)
        .map(|t| {
            let (_, key) = gateway
                .keys()
                .create(&TenantId::new(format!("tenant-{t}")), None, None)
                .unwrap();
            format!("Bearer {}", key.reveal())
        })
        .collect();
    let total = (rate * seconds) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        let due = start + interval * i as u32;
        tokio::time::sleep_until(due.into()).await;
        let (gateway, header) = (gateway.clone(), keys[i % keys.len()].clone());
        tasks.push(tokio::spawn(one_request(gateway, header)));
    }
    let mut latencies = Vec::with_capacity(total);
    let mut admission = Vec::with_capacity(total);
    for t in tasks {
        let (before, all) = t.await.unwrap();
        admission.push(before);
        latencies.push(all);
    }
    admission.sort();
    let a =
        |p: f64| us(admission[((admission.len() as f64 * p) as usize).min(admission.len() - 1)]);
    println!(
        "  of which before the engine (authenticate + admit): p50 {:.1} us, p99 {:.1} us",
        a(0.5),
        a(0.99)
    );
    let achieved = total as f64 / start.elapsed().as_secs_f64();
    if std::env::var_os("SHOW_SLOW").is_some() {
        for (i, l) in latencies
            .iter()
            .enumerate()
            .filter(|(_, l)| l.as_micros() >= 1000)
        {
            println!("request {i}: {:.1} ms", l.as_secs_f64() * 1e3);
        }
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "{total} requests at {achieved:.0}/s: gateway time p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, p99.9 {:.1} us, max {:.1} us",
        us(pct(0.5)),
        us(pct(0.9)),
        us(pct(0.99)),
        us(pct(0.999)),
        us(*latencies.last().unwrap())
    );
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The gateway's steps of one request; the engine's part is left out. Returns the time
/// before the engine would run, and the total.
async fn one_request(gateway: Arc<Gateway>, header: String) -> (Duration, Duration) {
    let t0 = Instant::now();
    let caller = gateway.authenticate(Some(&header)).unwrap();
    let mut plan = [PlannedPrompt {
        prompt_tokens: 16,
        max_tokens: 1,
        n: 1,
    }];
    let admitted = gateway.admit(&caller, "m", &mut plan).await.unwrap();
    let _salt = admitted.cache_salt(None);
    let ticket = admitted.ticket;
    let before_engine = t0.elapsed();
    ticket.submitted();
    ticket.on_tokens(0, 0, 1, Some(0));
    let done = ticket.on_finished(
        0,
        0,
        ChoiceEnd {
            prompt_tokens: 16,
            cached_tokens: 0,
            completion_tokens: 1,
            queued: Duration::from_micros(100),
            first_token: Some(Duration::from_micros(900)),
            compute: Duration::from_micros(800),
            finish_reason: "length",
            failed: false,
        },
    );
    assert!(done);
    ticket.commit().await;
    (before_engine, t0.elapsed())
}
