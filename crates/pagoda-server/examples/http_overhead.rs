//! The server's added cost: the same workload through the in-process engine and through
//! HTTP streaming, alternating, on fresh engines.
//!
//! cargo run --release -p pagoda-server --example http_overhead -- MODEL_DIR [REQUESTS] [CONCURRENCY] [OUTPUT_TOKENS] [ROUNDS]

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use pagoda_runtime::{EngineConfig, EngineHandle, GenerateRequest, SamplingParams};
use pagoda_server::{load_chat_template, serve, AppState};
use serde_json::json;
use tokio::sync::Semaphore;

struct Workload {
    prompts: Vec<Vec<u32>>,
    output_tokens: usize,
    concurrency: usize,
}

fn workload(vocab: usize, requests: usize, output_tokens: usize, concurrency: usize) -> Workload {
    let mut state = 12345u64;
    let prompts = (0..requests)
        .map(|_| {
            (0..64)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (3 + (state >> 33) as usize % (vocab - 3)) as u32
                })
                .collect()
        })
        .collect();
    Workload {
        prompts,
        output_tokens,
        concurrency,
    }
}

fn config(dir: &str) -> EngineConfig {
    let mut config = EngineConfig::new(dir);
    config.kv_cache_memory = 256 << 20;
    config.max_num_seqs = 256;
    // Distinct random prompts anyway; keep both runs free of cache effects.
    config.enable_prefix_caching = false;
    config
}

fn sampling(w: &Workload) -> SamplingParams {
    SamplingParams {
        ignore_eos: true,
        ..SamplingParams::greedy(w.output_tokens)
    }
}

async fn run_engine(engine: &EngineHandle, w: &Workload) -> (usize, Duration) {
    let limit = Arc::new(Semaphore::new(w.concurrency));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for prompt in &w.prompts {
        let permit = limit.clone().acquire_owned().await.unwrap();
        let mut stream = engine
            .submit(GenerateRequest::new(prompt.clone(), sampling(w)))
            .unwrap();
        tasks.push(tokio::spawn(async move {
            let mut tokens = 0;
            while let Some(out) = stream.next().await {
                tokens += out.token_ids.len();
            }
            drop(permit);
            tokens
        }));
    }
    let mut tokens = 0;
    for t in tasks {
        tokens += t.await.unwrap();
    }
    (tokens, start.elapsed())
}

async fn run_http(base: &str, w: &Workload) -> (usize, Duration) {
    let client = reqwest::Client::new();
    let limit = Arc::new(Semaphore::new(w.concurrency));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for prompt in &w.prompts {
        let permit = limit.clone().acquire_owned().await.unwrap();
        let body = json!({"prompt": prompt, "max_tokens": w.output_tokens, "temperature": 0, "ignore_eos": true,
                          "stream": true, "stream_options": {"include_usage": true}});
        let request = client
            .post(format!("{base}/v1/completions"))
            .json(&body)
            .send();
        tasks.push(tokio::spawn(async move {
            let response = request.await.unwrap();
            let mut stream = response.bytes_stream();
            let mut last = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.unwrap();
                last.extend_from_slice(&chunk);
                if last.len() > 4096 {
                    last.drain(..last.len() - 4096);
                }
            }
            drop(permit);
            let text = String::from_utf8_lossy(&last);
            let usage = text.rsplit("\"completion_tokens\":").next().unwrap_or("0");
            usage
                .split(',')
                .next()
                .unwrap_or("0")
                .trim()
                .parse::<usize>()
                .unwrap_or(0)
        }));
    }
    let mut tokens = 0;
    for t in tasks {
        tokens += t.await.unwrap();
    }
    (tokens, start.elapsed())
}

/// This process's user + system CPU seconds (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // After the command name: state is field 0, utime 11, stime 12 (clock ticks of 10 ms).
    (ticks(11) + ticks(12)) / 100.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("MODEL_DIR").clone();
    let arg = |i: usize, d: usize| args.get(i).map_or(d, |s| s.parse().unwrap());
    let (requests, concurrency, output, rounds) = (arg(2, 128), arg(3, 32), arg(4, 64), arg(5, 3));
    let mut engine_tps = Vec::new();
    let mut http_tps = Vec::new();
    for round in 0..rounds {
        let engine = pagoda_runtime::start(config(&dir)).unwrap();
        let w = workload(engine.info().vocab_size, requests, output, concurrency);
        let cpu = cpu_seconds();
        let (tokens, took) = run_engine(&engine, &w).await;
        let engine_cpu = cpu_seconds() - cpu;
        engine.shutdown();
        engine.join();
        let e = tokens as f64 / took.as_secs_f64();

        let engine = pagoda_runtime::start(config(&dir)).unwrap();
        let template = load_chat_template(std::path::Path::new(&dir), None).unwrap();
        let state = AppState::with_engine(vec!["m".into()], engine.clone(), template);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            listener,
            state,
            async move {
                let _ = rx.await;
            },
            Duration::from_secs(5),
        ));
        let cpu = cpu_seconds();
        let (http_tokens, took) = run_http(&base, &w).await;
        let http_cpu = cpu_seconds() - cpu;
        let _ = tx.send(());
        let _ = server.await;
        engine.shutdown();
        engine.join();
        let h = http_tokens as f64 / took.as_secs_f64();
        assert_eq!(http_tokens, tokens, "both paths generate the same tokens");
        println!(
            "round {round}: engine {e:.1} tok/s, http {h:.1} tok/s, overhead {:.2}%; CPU per token: engine {:.1} us, http (engine + server + client) {:.1} us",
            100.0 * (1.0 - h / e),
            1e6 * engine_cpu / tokens as f64,
            1e6 * http_cpu / tokens as f64,
        );
        engine_tps.push(e);
        http_tps.push(h);
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (e, h) = (mean(&engine_tps), mean(&http_tps));
    println!(
        "{requests} requests x {output} tokens, concurrency {concurrency}, {rounds} rounds: engine {e:.1} tok/s, http {h:.1} tok/s, overhead {:.2}%",
        100.0 * (1.0 - h / e)
    );
}
