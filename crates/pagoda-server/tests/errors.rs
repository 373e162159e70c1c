//! Every refusal in OpenAI's error shape, with the right status, and no block left behind.

mod common;

use std::time::Duration;

use common::{chat_body, engine_config, TestServer, MODEL};
use pagoda_server::AppState;
use serde_json::{json, Value};

fn assert_error(status: u16, body: &Value, want_status: u16, param: Option<&str>) {
    assert_eq!(status, want_status, "{body}");
    let error = &body["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].is_string(), "{body}");
    assert!(
        error.get("code").is_some() && error.get("param").is_some(),
        "{body}"
    );
    if let Some(param) = param {
        assert_eq!(error["param"], param, "{body}");
    }
}

#[tokio::test]
async fn malformed_json_and_wrong_types_are_400() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post_raw("/v1/chat/completions", "{\"messages\": [")
        .await;
    assert_error(status, &body, 400, None);
    let (status, body) = server.post_raw("/v1/completions", "[1, 2]").await;
    assert_error(status, &body, 400, None);
    let mut bad = chat_body("Hi", 4);
    bad["temperature"] = json!("hot");
    let (status, body) = server.post("/v1/chat/completions", bad).await;
    assert_error(status, &body, 400, Some("temperature"));
    let (status, body) = server
        .post("/v1/chat/completions", json!({"model": MODEL}))
        .await;
    assert_error(status, &body, 400, Some("messages"));
    let (status, body) = server
        .post("/v1/chat/completions", json!({"messages": []}))
        .await;
    assert_error(status, &body, 400, Some("messages"));
}

#[tokio::test]
async fn out_of_range_values_name_their_parameter() {
    let server = TestServer::start().await;
    let cases = [
        ("temperature", json!(-1.0)),
        ("top_p", json!(0.0)),
        ("top_k", json!(-5)),
        ("n", json!(0)),
        ("max_tokens", json!(0)),
        ("presence_penalty", json!(3.0)),
        ("frequency_penalty", json!(-3.0)),
        ("repetition_penalty", json!(0.0)),
        ("min_p", json!(2.0)),
        ("logit_bias", json!({"5": 500})),
        ("logit_bias", json!({"999999": 1})),
        ("logit_bias", json!({"word": 1})),
        ("stop_token_ids", json!([999999])),
        ("stop", json!([""])),
        ("max_tokens", json!(-3)),
    ];
    for (param, value) in cases {
        let mut body = chat_body("Hi", 4);
        body[param] = value.clone();
        let (status, body) = server.post("/v1/chat/completions", body).await;
        assert_error(status, &body, 400, Some(param));
    }
    let mut body = chat_body("Hi", 4);
    body["top_logprobs"] = json!(3);
    let (status, body) = server.post("/v1/chat/completions", body).await;
    assert_error(status, &body, 400, Some("top_logprobs"));
    let mut body = chat_body("Hi", 4);
    body["logprobs"] = json!(true);
    body["top_logprobs"] = json!(50);
    let (status, body) = server.post("/v1/chat/completions", body).await;
    assert_error(status, &body, 400, Some("top_logprobs"));
    let (status, body) = server
        .post("/v1/completions", json!({"prompt": [5, 99999]}))
        .await;
    assert_error(status, &body, 400, Some("prompt"));
    let (status, body) = server.post("/v1/completions", json!({"prompt": []})).await;
    assert_error(status, &body, 400, Some("prompt"));
    let (status, body) = server
        .post("/v1/chat/completions", json!({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}))
        .await;
    assert_error(status, &body, 400, Some("messages"));
    server.wait_idle().await;
    assert_eq!(server.metric("pagoda:kv_cache_blocks_used").await, 0.0);
}

#[tokio::test]
async fn an_unknown_model_or_route_is_404() {
    let server = TestServer::start().await;
    let mut body = chat_body("Hi", 4);
    body["model"] = json!("gpt-nothing");
    let (status, body) = server.post("/v1/chat/completions", body).await;
    assert_error(status, &body, 404, Some("model"));
    assert_eq!(body["error"]["code"], "model_not_found");
    let (status, text) = server.get_text("/v2/nothing").await;
    assert_eq!(status, 404);
    assert!(text.contains("\"error\""));
}

#[tokio::test]
async fn prompt_plus_max_tokens_over_the_context_is_400_with_the_numbers() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post(
            "/v1/completions",
            json!({"prompt": [5, 6, 7], "max_tokens": 600}),
        )
        .await;
    assert_error(status, &body, 400, None);
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let message = body["error"]["message"].as_str().unwrap();
    for number in ["512", "3", "600"] {
        assert!(message.contains(number), "{message}");
    }
    let long: Vec<u32> = vec![7; 600];
    let (status, body) = server
        .post("/v1/completions", json!({"prompt": long}))
        .await;
    assert_error(status, &body, 400, None);
    assert_eq!(body["error"]["code"], "context_length_exceeded");
}

#[tokio::test]
async fn a_full_admission_queue_is_429_with_retry_after() {
    let mut config = engine_config(MODEL);
    config.max_pending_requests = 1;
    let server = TestServer::start_with(config).await;
    let mut long = chat_body("Hi", 400);
    long["ignore_eos"] = json!(true);
    long["stream"] = json!(true);
    let running = server
        .client
        .post(server.url("/v1/chat/completions"))
        .json(&long)
        .send()
        .await
        .unwrap();
    assert_eq!(running.status(), 200);
    let response = server
        .client
        .post(server.url("/v1/chat/completions"))
        .json(&chat_body("Hi", 4))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    drop(running);
    server.wait_idle().await;
}

#[tokio::test]
async fn health_is_503_until_the_model_is_loaded() {
    let state = AppState::new(vec![MODEL.to_string()]);
    let engine = pagoda_runtime::start(engine_config(MODEL)).unwrap();
    let server =
        TestServer::start_state(state.clone(), engine.clone(), Duration::from_secs(5)).await;
    assert_eq!(server.get_text("/health").await.0, 503);
    let (status, body) = server
        .post("/v1/chat/completions", chat_body("Hi", 2))
        .await;
    assert_error(status, &body, 503, None);
    let template = pagoda_server::load_chat_template(&common::model_dir(MODEL), None).unwrap();
    state.set_loaded(pagoda_server::Loaded {
        engine,
        chat_template: template,
    });
    assert_eq!(server.get_text("/health").await.0, 200);
    assert_eq!(
        server
            .post("/v1/chat/completions", chat_body("Hi", 2))
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn a_model_without_a_chat_template_refuses_chat_but_serves_completions() {
    let engine = pagoda_runtime::start(engine_config(MODEL)).unwrap();
    let state = AppState::with_engine(vec![MODEL.to_string()], engine.clone(), None);
    let server = TestServer::start_state(state, engine, Duration::from_secs(5)).await;
    let (status, body) = server
        .post("/v1/chat/completions", chat_body("Hi", 2))
        .await;
    assert_error(status, &body, 400, Some("messages"));
    assert_eq!(
        server
            .post("/v1/completions", json!({"prompt": "Hi", "max_tokens": 2}))
            .await
            .0,
        200
    );
}

#[tokio::test]
async fn hostile_inputs_get_4xx_and_leave_the_server_healthy() {
    let server = TestServer::start().await;
    let bodies = [
        json!({"messages": [{"role": "user", "content": "Hi"}], "temperature": 1e39}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "presence_penalty": 1e39}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1e20}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "seed": "seven"}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "priority": 1_u64 << 40}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "min_tokens": 10, "max_tokens": 5}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "n": 100000}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "stop": 5}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "stream_options": "yes"}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "continue_final_message": true, "add_generation_prompt": true}),
        json!({"messages": "Hi"}),
        json!({"messages": [{"role": 5}]}),
        json!({"messages": [null]}),
        json!({"messages": [{"role": "user", "content": "Hi"}], "model": 7}),
    ];
    for body in bodies {
        let (status, response) = server.post("/v1/chat/completions", body.clone()).await;
        assert!(
            (400..500).contains(&status),
            "{body} -> {status} {response}"
        );
        assert!(response["error"]["message"].is_string());
    }
    let completions = [
        json!({"prompt": [[]]}),
        json!({"prompt": [-1]}),
        json!({"prompt": {"text": "Hi"}}),
        json!({"prompt": "Hi", "suffix": "x"}),
        json!({"prompt": "Hi", "echo": true, "logprobs": 2}),
        json!({"prompt": "Hi", "best_of": 3}),
        json!({"prompt": "Hi", "logprobs": 21}),
    ];
    for body in completions {
        let (status, response) = server.post("/v1/completions", body.clone()).await;
        assert!(
            (400..500).contains(&status),
            "{body} -> {status} {response}"
        );
    }
    for (path, body) in [
        ("/tokenize", json!({})),
        ("/tokenize", json!({"prompt": "a", "messages": []})),
        ("/detokenize", json!({"tokens": [99999999]})),
        ("/detokenize", json!({"tokens": "abc"})),
    ] {
        let (status, response) = server.post(path, body.clone()).await;
        assert_error(status, &response, 400, None);
    }
    server.wait_idle().await;
    assert_eq!(server.get_text("/health").await.0, 200);
    assert_eq!(server.metric("pagoda:kv_cache_blocks_used").await, 0.0);
}
