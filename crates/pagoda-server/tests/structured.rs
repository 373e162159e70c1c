//! Structured outputs over HTTP, beyond what the SDK test covers: every choice of `n` and every
//! prompt of a batch is constrained, and a constraint that cannot be followed is the client's
//! error (400), never a 500.

mod common;

use common::TestServer;
use serde_json::{json, Value};

#[tokio::test]
async fn every_choice_and_prompt_is_constrained() {
    let server = TestServer::start().await;
    let (status, r) = server
        .post(
            "/v1/completions",
            json!({"prompt": ["a", "b c", "d"], "n": 3, "temperature": 1.0, "seed": 5, "max_tokens": 20,
                   "structured_outputs": {"choice": ["red", "green", "blue"]}}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let choices = r["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 9);
    for c in choices {
        assert!(
            ["red", "green", "blue"].contains(&c["text"].as_str().unwrap()),
            "{r}"
        );
        assert_eq!(c["finish_reason"], "stop");
    }
    let schema = json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3});
    let (status, r) = server
        .post(
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "digits"}], "n": 4, "temperature": 1.0, "seed": 1,
                   "max_tokens": 40, "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": schema}}}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    let validator = jsonschema::validator_for(&schema).unwrap();
    for c in r["choices"].as_array().unwrap() {
        let value: Value = serde_json::from_str(c["message"]["content"].as_str().unwrap()).unwrap();
        assert!(validator.is_valid(&value), "{value}");
    }
    let metrics = server
        .client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        common::metric_value(&metrics, "pagoda:constraint_masks_total") >= 13.0,
        "{metrics}"
    );
    assert!(common::metric_value(&metrics, "pagoda:constraint_mask_seconds_total") > 0.0);
    server.wait_idle().await;
}

#[tokio::test]
async fn a_constraint_that_cannot_be_followed_is_a_400() {
    let server = TestServer::start().await;
    // Compiles, but the first step past it exceeds llguidance's work limit.
    let (status, r) = server
        .post(
            "/v1/completions",
            json!({"prompt": "x", "max_tokens": 20, "structured_outputs": {"grammar": "start: \"x\" start"}}),
        )
        .await;
    assert_eq!(status, 400, "{r}");
    assert_eq!(r["error"]["type"], "invalid_request_error");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("constraint"),
        "{r}"
    );
    // A grammar that does not parse is refused before generation, naming its parameter.
    let (status, r) = server
        .post(
            "/v1/completions",
            json!({"prompt": "x", "guided_grammar": "start: ("}),
        )
        .await;
    assert_eq!(
        (status, r["error"]["param"].as_str()),
        (400, Some("guided_grammar")),
        "{r}"
    );
    server.wait_idle().await;
}
