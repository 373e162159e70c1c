//! The render endpoints prefix-aware pickers call: the token ids of a request as the engine
//! would be given them, in vLLM's shapes, validated as generation validates.

mod common;

use common::TestServer;
use serde_json::json;

#[tokio::test]
async fn render_gives_the_token_ids_generation_would_use() {
    let server = TestServer::start().await;
    let messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name a colour."}
    ]);
    let (status, rendered) = server
        .post(
            "/v1/chat/completions/render",
            json!({"messages": messages, "max_tokens": 4}),
        )
        .await;
    assert_eq!(status, 200, "{rendered}");
    let ids = rendered["token_ids"].as_array().unwrap().clone();
    assert!(!ids.is_empty());
    assert_eq!(rendered["model"], common::MODEL);
    let (status, tokenized) = server
        .post(
            "/tokenize",
            json!({"messages": messages, "add_generation_prompt": true}),
        )
        .await;
    assert_eq!(status, 200, "{tokenized}");
    assert_eq!(tokenized["tokens"].as_array().unwrap(), &ids);
    // What the engine is then given: the same count of prompt tokens.
    let (status, done) = server
        .post(
            "/v1/chat/completions",
            json!({"messages": messages, "max_tokens": 1}),
        )
        .await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["usage"]["prompt_tokens"], ids.len());

    let (status, rendered) = server
        .post(
            "/v1/completions/render",
            json!({"prompt": ["Once upon", "a time"], "max_tokens": 2}),
        )
        .await;
    assert_eq!(status, 200, "{rendered}");
    let list = rendered.as_array().unwrap();
    assert_eq!(list.len(), 2);
    for (entry, text) in list.iter().zip(["Once upon", "a time"]) {
        let (_, t) = server.post("/tokenize", json!({"prompt": text})).await;
        assert_eq!(entry["token_ids"], t["tokens"], "{text}");
    }
}

#[tokio::test]
async fn render_refuses_what_generation_refuses() {
    let server = TestServer::start().await;
    for (path, body, param) in [
        (
            "/v1/chat/completions/render",
            json!({"messages": []}),
            "messages",
        ),
        (
            "/v1/chat/completions/render",
            json!({"messages": [{"role": "wizard", "content": "hi"}]}),
            "messages[0].role",
        ),
        (
            "/v1/completions/render",
            json!({"prompt": "hi", "n": 0}),
            "n",
        ),
    ] {
        let (status, resp) = server.post(path, body).await;
        assert_eq!(status, 400, "{path}: {resp}");
        assert_eq!(resp["error"]["param"], param, "{path}: {resp}");
    }
    let (status, resp) = server
        .post(
            "/v1/completions/render",
            json!({"prompt": "hi", "model": "other"}),
        )
        .await;
    assert_eq!(status, 404, "{resp}");
}

/// What routers and pickers retry on: a draining replica answers 503 with Retry-After (never
/// a 5xx that reads as a failure of the request itself), and /health says so.
#[tokio::test]
async fn a_draining_replica_answers_503_with_retry_after() {
    let server = TestServer::start().await;
    server.state.begin_draining();
    let response = server
        .client
        .post(server.url("/v1/completions"))
        .json(&json!({"prompt": "hi", "max_tokens": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    let (status, health) = server.get_text("/health").await;
    assert_eq!(status, 503);
    assert!(health.contains("draining"), "{health}");
}
