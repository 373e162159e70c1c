//! The official `openai` Python SDK against an in-process server. The package is required
//! (`.ci/run` installs it from `.ci/requirements.txt`).

mod common;

use common::{engine_config, run_python, TestServer, MODEL};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_works_unchanged() {
    let server = TestServer::start().await;
    let mut busy_config = engine_config(MODEL);
    busy_config.max_pending_requests = 1;
    let busy = TestServer::start_with(busy_config).await;
    let args = vec![server.base.clone(), busy.base.clone()];
    run_python("test_openai_sdk.py", args).await;
    server.wait_idle().await;
    busy.wait_idle().await;
}
