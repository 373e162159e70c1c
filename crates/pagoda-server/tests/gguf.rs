//! A GGUF file served as it is: the chat template, tokenizer and stop tokens come from its
//! metadata, and a greedy chat over HTTP gives the tokens transformers computed for the same
//! (decoded) weights and the same prompt (scripts/make_gguf_fixtures.py).

mod common;

use common::TestServer;
use pagoda_text::Tokenizer;
use serde_json::{json, Value};

const FILE: &str = "tiny-qwen2-f16.gguf";

fn testdata(path: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(path)
}

#[tokio::test]
async fn a_gguf_file_chats_as_transformers_computed() {
    let mut config = common::engine_config("tiny-qwen2");
    config.model_dir = testdata(&format!("gguf/{FILE}"));
    let server = TestServer::start_with(config).await;
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(testdata(&format!("gguf/{FILE}.reference.json"))).unwrap(),
    )
    .unwrap();
    // The fifth case is make_fixtures.py's chat: a system and a user message.
    let case = &reference["cases"][4];
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    let (prompt_ids, greedy) = (ids(&case["input_ids"]), ids(&case["greedy_ids"]));
    let messages = json!([
        {"role": "system", "content": "You are a terse test assistant."},
        {"role": "user", "content": "What is two plus two?"}
    ]);
    let body = json!({
        "model": common::MODEL,
        "messages": messages,
        "max_tokens": greedy.len(),
        "temperature": 0.0,
    });
    let (status, out) = server.post("/v1/chat/completions", body).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["usage"]["prompt_tokens"], prompt_ids.len(), "{out}");
    // Every step of this case has a top-2 margin above 0.03, far above the 1e-4 the logits
    // agree to; the tiny model's end of turn is <|im_end|> (id 2).
    let until_stop: Vec<u32> = greedy.iter().copied().take_while(|&t| t != 2).collect();
    let hf = Tokenizer::from_file(&testdata("models/tiny-qwen2/tokenizer.json")).unwrap();
    let want = hf.decode(&until_stop, true).unwrap();
    assert_eq!(
        out["choices"][0]["message"]["content"],
        want.as_str(),
        "{out}"
    );
}
