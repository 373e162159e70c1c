//! Server-sent events: deltas add up to the non-streamed text, usage comes last, [DONE] ends.

mod common;

use common::{chat_body, TestServer, MODEL};
use serde_json::{json, Value};

fn parse(events: &[String]) -> Vec<Value> {
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

#[tokio::test]
async fn streamed_chat_deltas_concatenate_to_the_non_streamed_text() {
    let server = TestServer::start().await;
    let (_, whole) = server
        .post("/v1/chat/completions", chat_body("Tell me a story", 30))
        .await;
    let mut body = chat_body("Tell me a story", 30);
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let chunks = parse(&server.stream("/v1/chat/completions", body).await);

    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut text = String::new();
    let mut finish = None;
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], MODEL);
        assert_eq!(chunk["id"], chunks[0]["id"]);
        for choice in chunk["choices"].as_array().unwrap() {
            if let Some(content) = choice["delta"]["content"].as_str() {
                text.push_str(content);
            }
            if !choice["finish_reason"].is_null() {
                finish = Some(choice["finish_reason"].clone());
            }
        }
    }
    assert_eq!(
        text,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    assert_eq!(finish.as_ref(), Some(&whole["choices"][0]["finish_reason"]));
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"]["prompt_tokens"],
        whole["usage"]["prompt_tokens"]
    );
    assert_eq!(
        last["usage"]["completion_tokens"],
        whole["usage"]["completion_tokens"]
    );
    // Every chunk before the last carries `usage: null` when usage was asked for.
    assert!(chunks[..chunks.len() - 1]
        .iter()
        .all(|c| c["usage"].is_null()));
}

#[tokio::test]
async fn streamed_completions_with_n_two_keep_choices_apart() {
    let server = TestServer::start().await;
    let request = json!({"prompt": "Once upon a time", "max_tokens": 10, "temperature": 0, "n": 2, "ignore_eos": true});
    let (_, whole) = server.post("/v1/completions", request.clone()).await;
    let mut streamed = request;
    streamed["stream"] = json!(true);
    let chunks = parse(&server.stream("/v1/completions", streamed).await);
    let mut texts = vec![String::new(); 2];
    for chunk in &chunks {
        assert_eq!(chunk["object"], "text_completion");
        assert!(chunk.get("usage").is_none(), "no usage unless asked");
        for choice in chunk["choices"].as_array().unwrap() {
            texts[choice["index"].as_u64().unwrap() as usize]
                .push_str(choice["text"].as_str().unwrap());
        }
    }
    for (i, text) in texts.iter().enumerate() {
        assert_eq!(text, whole["choices"][i]["text"].as_str().unwrap());
    }
}

#[tokio::test]
async fn streamed_logprobs_arrive_with_their_tokens() {
    let server = TestServer::start().await;
    let mut body = chat_body("Hi", 4);
    body["stream"] = json!(true);
    body["logprobs"] = json!(true);
    body["ignore_eos"] = json!(true);
    let chunks = parse(&server.stream("/v1/chat/completions", body).await);
    let tokens: usize = chunks
        .iter()
        .flat_map(|c| c["choices"].as_array().unwrap().clone())
        .filter_map(|c| c["logprobs"]["content"].as_array().map(Vec::len))
        .sum();
    assert_eq!(tokens, 4);
}
