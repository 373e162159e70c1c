//! KV events against a real subscriber: `tests/python/test_kv_events.py` (pyzmq and msgpack,
//! the clients routers use) rebuilds the prefix cache from the PUB stream and a replay while a
//! workload runs, and its copy must equal the engine's own index exactly. Needs pyzmq, msgpack
//! and xxhash (`.ci/requirements.txt`).

mod common;

use std::collections::BTreeSet;

use common::{engine_config, run_python, TestServer, MODEL};
use pagoda_server::kv_events::{self, wire_hash, KvEventsSettings};

const TOPIC: &str = "kv@test-host:8000@tiny-qwen2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_rebuilds_the_engine_prefix_cache_from_the_kv_events() {
    let settings = KvEventsSettings {
        endpoint: "tcp://*:0".into(),
        replay_endpoint: Some("tcp://*:0".into()),
        topic: TOPIC.into(),
    };
    let mut config = engine_config(MODEL);
    // 40 blocks of 16 tokens (16 KiB each for this model): the workload's 54 distinct prompts
    // of 4 blocks each do not fit, so blocks are evicted and announced removed.
    config.kv_cache_memory = 40 * 16 * 1024;
    config.max_model_len = Some(128);
    let publisher = kv_events::start(&settings, config.block_size)
        .await
        .unwrap();
    config.kv_events = Some(publisher.sink.clone());
    let server = TestServer::start_with(config).await;
    server.state.set_kv_events(publisher.stats.clone());
    let local = |endpoint: &str| endpoint.replace("0.0.0.0", "127.0.0.1");
    let args = vec![
        local(&publisher.endpoint),
        local(publisher.replay_endpoint.as_deref().unwrap()),
        server.base.clone(),
        TOPIC.to_string(),
        "16".into(),
        pagoda_engine::kv_cache::block_hash::DEFAULT_HASH_SEED.to_string(),
    ];
    let stdout = run_python("test_kv_events.py", args).await;
    server.wait_idle().await;
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().expect("a report line")).unwrap();
    let router: BTreeSet<u64> = report["hashes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_u64().unwrap())
        .collect();
    let engine: BTreeSet<u64> = server
        .engine
        .prefix_cache_hashes()
        .await
        .unwrap()
        .into_iter()
        .map(wire_hash)
        .collect();
    assert!(!engine.is_empty());
    assert_eq!(
        router, engine,
        "the router's copy differs from the engine's index"
    );
    assert!(report["removed"].as_u64().unwrap() > 0);
    assert_eq!(
        server.metric("pagoda:kv_events_published_total").await as u64,
        report["last_seq"].as_u64().unwrap() + 1
    );
    assert_eq!(server.metric("pagoda:kv_events_dropped_total").await, 0.0);
}
