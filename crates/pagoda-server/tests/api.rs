//! The endpoints' happy paths: outputs, usage, models, tokenize, health, metrics.

mod common;

use common::{chat_body, TestServer, MODEL};
use pagoda_runtime::{GenerateRequest, SamplingParams};
use pagoda_text::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
use serde_json::json;

/// What the engine itself produces for a greedy chat, without HTTP.
async fn engine_greedy_chat(
    server: &TestServer,
    content: &str,
    max_tokens: usize,
) -> (String, Vec<u32>) {
    let template = ChatTemplate::from_model_dir(&common::model_dir(MODEL))
        .unwrap()
        .unwrap();
    let options = RenderOptions {
        add_generation_prompt: true,
        ..RenderOptions::default()
    };
    let prompt = template
        .render(&[ChatMessage::text("user", content)], &options)
        .unwrap();
    let ids = server.engine.tokenizer().encode(&prompt, false).unwrap();
    let mut stream = server
        .engine
        .submit(GenerateRequest::new(
            ids.clone(),
            SamplingParams::greedy(max_tokens),
        ))
        .unwrap();
    let mut text = String::new();
    while let Some(out) = stream.next().await {
        text.push_str(&out.text);
    }
    (text, ids)
}

#[tokio::test]
async fn greedy_chat_output_equals_the_engines() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post("/v1/chat/completions", chat_body("Tell me a story", 24))
        .await;
    assert_eq!(status, 200, "{body}");
    let (expected, prompt_ids) = engine_greedy_chat(&server, "Tell me a story", 24).await;
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], expected.as_str());
    assert!(["stop", "length"].contains(&body["choices"][0]["finish_reason"].as_str().unwrap()));
    let usage = &body["usage"];
    assert_eq!(usage["prompt_tokens"], prompt_ids.len());
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!((1..=24).contains(&completion));
    assert_eq!(usage["total_tokens"], prompt_ids.len() as u64 + completion);
}

#[tokio::test]
async fn max_tokens_bounds_the_output_and_reports_length() {
    let server = TestServer::start().await;
    let mut body = chat_body("Count", 5);
    body["ignore_eos"] = json!(true);
    let (status, body) = server.post("/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["completion_tokens"], 5);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn a_repeated_prefix_reports_cached_tokens() {
    let server = TestServer::start().await;
    let long = "the quick brown fox jumps over the lazy dog ".repeat(8);
    let (_, first) = server
        .post("/v1/chat/completions", chat_body(&long, 2))
        .await;
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let (_, second) = server
        .post("/v1/chat/completions", chat_body(&long, 2))
        .await;
    let prompt = second["usage"]["prompt_tokens"].as_u64().unwrap();
    let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap();
    assert!(cached > 0 && cached < prompt, "cached {cached} of {prompt}");
    assert_eq!(cached % 16, 0, "whole blocks only");
    assert!(server.metric("pagoda:prefix_cache_hits_total").await >= cached as f64);
}

#[tokio::test]
async fn different_cache_salts_never_share_cached_prefixes() {
    let server = TestServer::start().await;
    let long = "a cache salt keeps tenants apart ".repeat(8);
    let mut body = chat_body(&long, 2);
    body["cache_salt"] = json!("tenant-a");
    server.post("/v1/chat/completions", body.clone()).await;
    body["cache_salt"] = json!("tenant-b");
    let (_, other) = server.post("/v1/chat/completions", body.clone()).await;
    assert_eq!(other["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    body["cache_salt"] = json!("tenant-a");
    let (_, same) = server.post("/v1/chat/completions", body).await;
    assert!(
        same["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn completions_accept_text_token_ids_and_several_prompts() {
    let server = TestServer::start().await;
    let (status, body) = server
        .post(
            "/v1/completions",
            json!({"model": MODEL, "prompt": ["Once upon", "a time"], "max_tokens": 4, "temperature": 0, "n": 2, "ignore_eos": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "text_completion");
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 4);
    for (i, choice) in choices.iter().enumerate() {
        assert_eq!(choice["index"], i);
    }
    // Greedy: both choices of one prompt agree.
    assert_eq!(choices[0]["text"], choices[1]["text"]);
    assert_eq!(choices[2]["text"], choices[3]["text"]);
    assert_eq!(body["usage"]["completion_tokens"], 16);
    let tokenizer = server.engine.tokenizer();
    let prompt_tokens = tokenizer.encode("Once upon", true).unwrap().len()
        + tokenizer.encode("a time", true).unwrap().len();
    assert_eq!(body["usage"]["prompt_tokens"], prompt_tokens);

    let (status, body) = server
        .post(
            "/v1/completions",
            json!({"prompt": [[12, 34, 56], [7, 8]], "max_tokens": 2, "ignore_eos": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"].as_array().unwrap().len(), 2);
    assert_eq!(body["usage"]["prompt_tokens"], 5);
    let (_, body) = server
        .post(
            "/v1/completions",
            json!({"prompt": [12, 34, 56], "max_tokens": 2}),
        )
        .await;
    assert_eq!(body["usage"]["prompt_tokens"], 3);
}

#[tokio::test]
async fn completions_default_to_sixteen_tokens_and_echo_the_prompt() {
    let server = TestServer::start().await;
    let (_, body) = server
        .post(
            "/v1/completions",
            json!({"prompt": "Hello", "ignore_eos": true, "echo": true, "temperature": 0}),
        )
        .await;
    assert_eq!(body["usage"]["completion_tokens"], 16);
    assert!(body["choices"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("Hello"));
}

#[tokio::test]
async fn stop_strings_end_the_output_before_the_stop() {
    let server = TestServer::start().await;
    let (_, free) = server
        .post(
            "/v1/completions",
            json!({"prompt": "The", "max_tokens": 12, "temperature": 0, "ignore_eos": true}),
        )
        .await;
    let text = free["choices"][0]["text"].as_str().unwrap().to_string();
    // Stop on a piece of the greedy output: the output becomes everything before it.
    let stop: String = text.chars().skip(3).take(2).collect();
    let (_, stopped) = server
        .post("/v1/completions", json!({"prompt": "The", "max_tokens": 12, "temperature": 0, "ignore_eos": true, "stop": [stop.clone()]}))
        .await;
    let cut = &text[..text.find(&stop).unwrap()];
    assert_eq!(stopped["choices"][0]["text"], cut);
    assert_eq!(stopped["choices"][0]["finish_reason"], "stop");
}

#[tokio::test]
async fn chat_logprobs_have_the_openai_shape() {
    let server = TestServer::start().await;
    let mut body = chat_body("Hi", 3);
    body["logprobs"] = json!(true);
    body["top_logprobs"] = json!(2);
    body["ignore_eos"] = json!(true);
    let (status, body) = server.post("/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{body}");
    let content = body["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap();
    assert_eq!(content.len(), 3);
    for entry in content {
        assert!(entry["logprob"].as_f64().unwrap() <= 0.0);
        assert!(entry["token"].is_string());
        assert!(entry["bytes"].is_array());
        let top = entry["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 2);
        // Greedy: the chosen token is the most likely one.
        assert_eq!(top[0]["logprob"], entry["logprob"]);
    }
    let joined: String = content
        .iter()
        .map(|e| e["token"].as_str().unwrap())
        .collect();
    assert_eq!(
        joined,
        body["choices"][0]["message"]["content"].as_str().unwrap()
    );
}

#[tokio::test]
async fn seeded_sampling_with_n_two_reproduces() {
    let server = TestServer::start().await;
    let body = json!({"messages": [{"role": "user", "content": "Hi"}], "n": 2, "seed": 7, "temperature": 1.0, "max_tokens": 8});
    let (_, a) = server.post("/v1/chat/completions", body.clone()).await;
    let (_, b) = server.post("/v1/chat/completions", body).await;
    assert_eq!(a["choices"].as_array().unwrap().len(), 2);
    assert_eq!(a["choices"], b["choices"]);
}

#[tokio::test]
async fn models_version_health_and_metrics_answer() {
    let server = TestServer::start().await;
    let (status, models) = server.get_text("/v1/models").await;
    assert_eq!(status, 200);
    let models: serde_json::Value = serde_json::from_str(&models).unwrap();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], MODEL);
    assert_eq!(models["data"][0]["max_model_len"], 512);
    let (status, card) = server.get_text(&format!("/v1/models/{MODEL}")).await;
    assert_eq!(status, 200);
    assert!(card.contains("\"object\":\"model\""));
    assert_eq!(server.get_text("/v1/models/org/other").await.0, 404);
    let (status, version) = server.get_text("/version").await;
    assert_eq!(status, 200);
    assert!(version.contains(env!("CARGO_PKG_VERSION")));
    assert_eq!(server.get_text("/health").await.0, 200);

    server
        .post("/v1/chat/completions", chat_body("Hi", 4))
        .await;
    let (status, metrics) = server.get_text("/metrics").await;
    assert_eq!(status, 200);
    for name in [
        "pagoda:num_requests_running",
        "pagoda:num_requests_waiting",
        "pagoda:kv_cache_usage_perc",
        "pagoda:prefix_cache_queries_total",
        "pagoda:prefix_cache_hits_total",
        "pagoda:num_preemptions_total",
        "pagoda:prompt_tokens_total",
        "pagoda:generation_tokens_total",
        "pagoda:time_to_first_token_seconds_bucket",
        "pagoda:inter_token_latency_seconds_bucket",
        "pagoda:e2e_request_latency_seconds_bucket",
        "pagoda:request_queue_time_seconds_bucket",
    ] {
        assert!(metrics.contains(name), "{name} missing");
    }
    assert_eq!(
        common::metric_value(&metrics, "pagoda:time_to_first_token_seconds_count"),
        1.0
    );
    assert!(common::metric_value(&metrics, "pagoda:generation_tokens_total") >= 1.0);
}

#[tokio::test]
async fn tokenize_and_detokenize_round_trip() {
    let server = TestServer::start().await;
    let (status, t) = server
        .post(
            "/tokenize",
            json!({"prompt": "Hello world", "return_token_strs": true}),
        )
        .await;
    assert_eq!(status, 200, "{t}");
    let ids = server
        .engine
        .tokenizer()
        .encode("Hello world", true)
        .unwrap();
    assert_eq!(t["tokens"], json!(ids));
    assert_eq!(t["count"], ids.len());
    assert_eq!(t["max_model_len"], 512);
    assert_eq!(t["token_strs"].as_array().unwrap().len(), ids.len());
    let (_, d) = server.post("/detokenize", json!({"tokens": ids})).await;
    assert_eq!(d["prompt"], "Hello world");

    let (_, chat) = server
        .post("/tokenize", json!({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}]}))
        .await;
    let rendered = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    let expected = server.engine.tokenizer().encode(rendered, false).unwrap();
    assert_eq!(chat["tokens"], json!(expected));
}

#[tokio::test]
async fn continue_final_message_continues_the_assistant_turn() {
    let server = TestServer::start().await;
    let (status, t) = server
        .post(
            "/tokenize",
            json!({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello th"}], "continue_final_message": true, "add_generation_prompt": false}),
        )
        .await;
    assert_eq!(status, 200, "{t}");
    let rendered = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello th";
    assert_eq!(
        t["tokens"],
        json!(server.engine.tokenizer().encode(rendered, false).unwrap())
    );
    let (status, body) = server
        .post(
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello th"}], "continue_final_message": true, "add_generation_prompt": false, "max_tokens": 3}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}
