//! Structured outputs through the official `openai` Python SDK (`parse`, streamed `parse`,
//! `response_format`, vLLM's `structured_outputs` and `guided_*`), outputs validated with
//! `jsonschema`. Needs `openai` and `jsonschema` (`.ci/requirements.txt`).

mod common;

use std::process::Command;

use common::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_outputs_validate_through_the_openai_sdk() {
    let server = TestServer::start().await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/test_structured_sdk.py"
    );
    let base = server.base.clone();
    let output =
        tokio::task::spawn_blocking(move || Command::new("python3").arg(script).arg(base).output())
            .await
            .unwrap()
            .unwrap();
    assert!(
        output.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    server.wait_idle().await;
}
