//! The official `openai` Python SDK against an in-process server. The package is required
//! (`.ci/run` installs it from `.ci/requirements.txt`).

mod common;

use std::process::Command;

use common::{engine_config, TestServer, MODEL};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_python_sdk_works_unchanged() {
    let server = TestServer::start().await;
    let mut busy_config = engine_config(MODEL);
    busy_config.max_pending_requests = 1;
    let busy = TestServer::start_with(busy_config).await;
    let busy_base = busy.base.clone();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/test_openai_sdk.py"
    );
    let base = server.base.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .arg(script)
            .arg(base)
            .arg(busy_base)
            .output()
    })
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
    busy.wait_idle().await;
}
