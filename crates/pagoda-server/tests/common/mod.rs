//! A server on an ephemeral port, started in-process around a tiny fixture model.
#![allow(dead_code)]

pub mod gateway;

use std::path::PathBuf;
use std::time::Duration;

use pagoda_runtime::{EngineConfig, EngineHandle};
use pagoda_server::{load_chat_template, serve_with, AppState, HttpLimits};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const MODEL: &str = "tiny-qwen2";

/// Runs `tests/python/SCRIPT` with `args` (on the blocking pool, so the in-process server
/// keeps serving) and fails the test with its output unless it exits 0. Returns its stdout.
pub async fn run_python(script: &str, args: Vec<String>) -> String {
    let path = format!("{}/tests/python/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(path)
            .args(args)
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
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn model_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/models")
        .join(name)
}

/// Small enough to start in milliseconds, big enough for 200 short requests at once.
pub fn engine_config(name: &str) -> EngineConfig {
    let mut config = EngineConfig::new(model_dir(name));
    config.kv_cache_memory = 32 << 20;
    config.max_num_seqs = 256;
    config
}

pub struct TestServer {
    pub base: String,
    pub engine: EngineHandle,
    pub state: AppState,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::start_with(engine_config(MODEL)).await
    }

    pub async fn start_with(config: EngineConfig) -> TestServer {
        let template = load_chat_template(&config.model_dir, None).unwrap();
        let engine = pagoda_runtime::start(config).unwrap();
        let state = AppState::with_engine(vec![MODEL.to_string()], engine.clone(), template);
        TestServer::start_state(state, engine, Duration::from_secs(10)).await
    }

    pub async fn start_state(state: AppState, engine: EngineHandle, drain: Duration) -> TestServer {
        TestServer::start_http(state, engine, drain, HttpLimits::default()).await
    }

    /// With connection deadlines and a connection cap of the test's choosing.
    pub async fn start_http(
        state: AppState,
        engine: EngineHandle,
        drain: Duration,
        http: HttpLimits,
    ) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with(
            listener,
            state.clone(),
            http,
            async move {
                let _ = rx.await;
            },
            drain,
        ));
        TestServer {
            base,
            engine,
            state,
            client: reqwest::Client::new(),
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        (status, json)
    }

    pub async fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        let response = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    pub async fn get_text(&self, path: &str) -> (u16, String) {
        let response = self.client.get(self.url(path)).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    /// The `data:` payloads of a streamed response, `[DONE]` included.
    pub async fn stream(&self, path: &str, body: Value) -> Vec<String> {
        let response = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let text = response.text().await.unwrap();
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                e.strip_prefix("data: ")
                    .unwrap_or_else(|| panic!("bad event {e:?}"))
                    .to_string()
            })
            .collect()
    }

    /// A metric's value from /metrics (first sample whose name and labels start with `prefix`).
    pub async fn metric(&self, prefix: &str) -> f64 {
        let (_, text) = self.get_text("/metrics").await;
        metric_value(&text, prefix)
    }

    /// Waits until the engine has nothing running or waiting.
    pub async fn wait_idle(&self) {
        for _ in 0..500 {
            if self.engine.num_in_flight() == 0 {
                let stats = self.engine.stats();
                if stats.num_running == 0 && stats.num_waiting == 0 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("engine still busy: {:?}", self.engine.stats());
    }

    /// Triggers shutdown and waits for `serve` to return.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.take().unwrap().await.unwrap()
    }

    pub fn begin_shutdown(&mut self) -> JoinHandle<std::io::Result<()>> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.take().unwrap()
    }
}

pub fn metric_value(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {prefix}"))
}

pub fn chat_body(content: &str, max_tokens: usize) -> Value {
    serde_json::json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
    })
}
