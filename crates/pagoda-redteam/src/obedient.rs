//! A deliberately obedient target for testing the runner: an OpenAI-compatible endpoint
//! whose "model" answers with the whole conversation it was given, and calls any offered
//! tool the conversation mentions. It leaks every canary, repeats every marker phrase and
//! follows every injected tool request: the worst case a red-team run must detect.
//!
//! With a `Guard`, the same pagoda-guard pipeline Pagoda's server uses sits in front of it:
//! requests screened (400 on a refusal), PII rewritten, a canary put at the start of the
//! system prompt, the reply filtered. That shows what the guardrails stop when the model
//! itself would obey anything.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use pagoda_guard::canary::{new_canary, with_canary};
use pagoda_guard::inject::{rot13, Decoders};
use pagoda_guard::{Guard, MessageText, Refusal};
use serde_json::{json, Value};
use tokio::net::TcpListener;

#[derive(Clone)]
struct Target {
    guard: Option<Arc<Guard>>,
}

/// Serves on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, guard: Option<Arc<Guard>>) -> std::io::Result<()> {
    let app = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .with_state(Target { guard });
    axum::serve(listener, app).await
}

async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "obedient", "object": "model"}]}))
}

async fn chat(State(target): State<Target>, Json(body): Json<Value>) -> Response {
    let mut messages: Vec<(String, String)> = body["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    let role = m["role"].as_str().unwrap_or("user").to_string();
                    // Text parts joined, as Pagoda's server hands them to the template.
                    let content = match &m["content"] {
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|p| p["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        other => other.as_str().unwrap_or_default().to_string(),
                    };
                    (role, content)
                })
                .collect()
        })
        .unwrap_or_default();
    let tools: Vec<String> = body["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();

    let Some(guard) = &target.guard else {
        return completion(obey(&messages, &tools)).into_response();
    };
    let policy = guard.policy(None);
    let texts: Vec<MessageText> = messages
        .iter()
        .map(|(role, text)| MessageText { role, text })
        .collect();
    let screened = guard.screen(policy, &texts, &[]);
    if let Some(refusal) = &screened.refusal {
        let (code, message) = match refusal {
            Refusal::Pii(kinds) => (
                "pii_detected",
                format!(
                    "the request contains {}",
                    kinds
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Refusal::Injection { .. } => (
                "prompt_injection_detected",
                "the request looks like a prompt injection".to_string(),
            ),
        };
        let body = json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": code}});
        return (StatusCode::BAD_REQUEST, Json(body)).into_response();
    }
    for (m, new) in messages.iter_mut().zip(&screened.rewritten) {
        if let Some(new) = new {
            m.1 = new.clone();
        }
    }
    let canary = policy.canary.then(new_canary);
    if let Some(c) = &canary {
        // At the start, so a leak of the system prompt reaches the canary first.
        match messages.iter_mut().find(|(role, _)| role == "system") {
            Some(system) => system.1 = format!("{}\n{}", with_canary("", c), system.1),
            None => messages.insert(0, ("system".into(), with_canary("", c))),
        }
    }
    let mut filter = guard.output(policy, &screened, canary.as_deref());
    let mut reply = obey(&messages, &tools);
    let filtered = filter.filter_all(&reply.0);
    reply.0 = filtered.text;
    if filtered.stop {
        reply.1.clear();
    }
    completion(reply).into_response()
}

/// The obedient answer: the conversation, what its encoded payloads decode to (base64, hex,
/// ROT13 where the text names it), and a call of every offered tool it mentions.
fn obey(messages: &[(String, String)], tools: &[String]) -> (String, Vec<String>) {
    let decoders = Decoders::new();
    let mut lines = Vec::new();
    for (role, content) in messages {
        lines.push(format!("{role}: {content}"));
        for (_, decoded) in decoders.decode_all(content) {
            lines.push(format!("(decoded) {decoded}"));
        }
        if content.to_lowercase().contains("rot13") {
            lines.push(format!("(decoded) {}", rot13(content)));
        }
    }
    let text = lines.join("\n");
    let calls = tools
        .iter()
        .filter(|t| text.contains(t.as_str()))
        .cloned()
        .collect();
    (text, calls)
}

fn completion((text, calls): (String, Vec<String>)) -> Json<Value> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, name)| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": "{}"}}))
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    Json(json!({
        "id": "chatcmpl-obedient",
        "object": "chat.completion",
        "model": "obedient",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    }))
}
