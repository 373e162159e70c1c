//! The test picker as a process, for scripts/bench_picker.sh:
//! `picker LISTEN_ADDR prefix|round-robin HTTP_ADDR=KV_EVENTS_ENDPOINT...`
//! (block size 16 and the default hash seed, as `pagoda serve` has them by default).

use std::time::Duration;

use pagoda_picker::{Mode, PickerService, Pod, Pods, PrefixHasher};

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: picker LISTEN_ADDR prefix|round-robin HTTP_ADDR=KV_ENDPOINT...");
        std::process::exit(2);
    }
    let mode = match args[1].as_str() {
        "prefix" => Mode::PrefixAware,
        "round-robin" => Mode::RoundRobin,
        other => {
            eprintln!("unknown mode `{other}`: prefix or round-robin");
            std::process::exit(2);
        }
    };
    let pods = args[2..]
        .iter()
        .map(|spec| {
            let (http, kv) = spec.split_once('=').unwrap_or((spec, ""));
            Pod {
                http: http.parse().unwrap_or_else(|_| {
                    eprintln!("`{http}` is not IP:PORT");
                    std::process::exit(2)
                }),
                kv_events: (!kv.is_empty()).then(|| kv.to_string()),
            }
        })
        .collect();
    let pods = Pods::start(pods, Duration::from_millis(50)).await;
    let hasher = PrefixHasher::new(pagoda_engine::kv_cache::block_hash::DEFAULT_HASH_SEED, 16);
    let picker = PickerService::new(pods, hasher, mode);
    let listener = tokio::net::TcpListener::bind(&args[0])
        .await
        .unwrap_or_else(|e| {
            eprintln!("cannot listen on {}: {e}", args[0]);
            std::process::exit(1)
        });
    if let Err(e) = pagoda_picker::serve(picker, listener).await {
        eprintln!("picker stopped: {e}");
        std::process::exit(1);
    }
}
