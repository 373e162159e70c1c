//! Structured outputs through the official `openai` Python SDK (`parse`, streamed `parse`,
//! `response_format`, vLLM's `structured_outputs` and `guided_*`), outputs validated with
//! `jsonschema`. Needs `openai` and `jsonschema` (`.ci/requirements.txt`).

mod common;

use common::{run_python, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_outputs_validate_through_the_openai_sdk() {
    let server = TestServer::start().await;
    run_python("test_structured_sdk.py", vec![server.base.clone()]).await;
    server.wait_idle().await;
}
