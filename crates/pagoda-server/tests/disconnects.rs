//! Clients that leave mid-stream abort their requests; shutdown drains what is in flight.

mod common;

use std::time::{Duration, Instant};

use common::{chat_body, engine_config, TestServer, MODEL};
use futures_util::StreamExt;
use serde_json::json;

/// A small deterministic generator, so a failure replays.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_clients_leaving_at_random_points_leave_no_block_in_use() {
    let server = TestServer::start().await;
    let mut seed = 42u64;
    let mut clients = Vec::new();
    for i in 0..200 {
        let chunks_to_read = (lcg(&mut seed) % 24) as usize;
        let max_tokens = 8 + (lcg(&mut seed) % 40) as usize;
        let client = server.client.clone();
        let url = server.url(if i % 2 == 0 {
            "/v1/chat/completions"
        } else {
            "/v1/completions"
        });
        let mut body = if i % 2 == 0 {
            chat_body(&format!("client {i} says hello"), max_tokens)
        } else {
            json!({"prompt": format!("client {i} writes"), "max_tokens": max_tokens})
        };
        body["stream"] = json!(true);
        body["ignore_eos"] = json!(true);
        clients.push(tokio::spawn(async move {
            let response = client.post(url).json(&body).send().await.unwrap();
            assert_eq!(response.status(), 200);
            let mut stream = response.bytes_stream();
            for _ in 0..chunks_to_read {
                if stream.next().await.is_none() {
                    break;
                }
            }
            // Dropping the stream closes the connection mid-response.
        }));
    }
    for client in clients {
        client.await.unwrap();
    }
    server.wait_idle().await;
    assert_eq!(server.metric("pagoda:kv_cache_blocks_used").await, 0.0);
    assert_eq!(server.metric("pagoda:num_requests_running").await, 0.0);
    assert_eq!(server.metric("pagoda:num_requests_waiting").await, 0.0);
    let (_, metrics) = server.get_text("/metrics").await;
    let aborted = common::metric_value(
        &metrics,
        "pagoda:request_success_total{model_name=\"tiny-qwen2\",finished_reason=\"abort\"}",
    );
    assert!(aborted > 0.0, "some clients left early");
    // The server still works afterwards.
    assert_eq!(
        server
            .post("/v1/chat/completions", chat_body("Hi", 2))
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn shutdown_drains_in_flight_streams_and_refuses_new_work() {
    let mut server = TestServer::start().await;
    let mut body = chat_body("Hi", 60);
    body["stream"] = json!(true);
    body["ignore_eos"] = json!(true);
    let response = server
        .client
        .post(server.url("/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));

    let stopped = server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(server.state.is_draining());
    let mut rest = Vec::new();
    while let Some(chunk) = stream.next().await {
        rest.extend_from_slice(&chunk.unwrap());
    }
    let rest = String::from_utf8(rest).unwrap();
    assert!(
        rest.ends_with("data: [DONE]\n\n"),
        "the in-flight stream completed"
    );
    assert!(rest.contains("\"finish_reason\":\"length\""));
    tokio::time::timeout(Duration::from_secs(10), stopped)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        server
            .client
            .get(server.url("/health"))
            .send()
            .await
            .is_err(),
        "the listener is closed"
    );
}

#[tokio::test]
async fn the_drain_timeout_bounds_shutdown() {
    let engine = pagoda_runtime::start(engine_config(MODEL)).unwrap();
    let template = pagoda_server::load_chat_template(&common::model_dir(MODEL), None).unwrap();
    let state = pagoda_server::AppState::with_engine(vec![MODEL.into()], engine.clone(), template);
    let mut server = TestServer::start_state(state, engine, Duration::from_millis(300)).await;
    let mut body = chat_body("Hi", 500);
    body["stream"] = json!(true);
    body["ignore_eos"] = json!(true);
    let response = server
        .client
        .post(server.url("/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    stream.next().await.unwrap().unwrap();
    let start = Instant::now();
    let stopped = server.begin_shutdown();
    tokio::time::timeout(Duration::from_secs(10), stopped)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    drop(stream);
}
