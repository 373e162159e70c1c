//! A test server behind a gateway whose database and policy live in a temp dir.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use pagoda_gateway::{Gateway, GatewayConfig, TenantId};
use pagoda_server::{load_chat_template, AppState, HttpLimits};
use reqwest::header::HeaderMap;
use rust_decimal::Decimal;
use serde_json::Value;

use super::{engine_config, TestServer, MODEL};

pub const PRICES: &str = r#"
[pricing."tiny-qwen2"]
input = "0.50"
cached_input = "0.05"
output = "1.50"
"#;

pub struct GatewayServer {
    pub server: TestServer,
    pub gateway: Arc<Gateway>,
    pub db: PathBuf,
    pub policy: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub json: Value,
}

impl GatewayServer {
    pub async fn start(policy: &str) -> GatewayServer {
        let dir = tempfile::tempdir().unwrap();
        let mut s = GatewayServer::start_in(dir.path().to_path_buf(), policy, None).await;
        s._dir = Some(dir);
        s
    }

    /// With the engine settings and HTTP deadlines of the test's choosing.
    pub async fn start_tuned(
        policy: &str,
        engine_config: pagoda_runtime::EngineConfig,
        http: HttpLimits,
    ) -> GatewayServer {
        GatewayServer::start_configured(policy, engine_config, http, |_| {}).await
    }

    /// With the gateway settings changed by `configure` as well.
    pub async fn start_configured(
        policy: &str,
        engine_config: pagoda_runtime::EngineConfig,
        http: HttpLimits,
        configure: impl FnOnce(&mut GatewayConfig),
    ) -> GatewayServer {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let mut s =
            GatewayServer::start_custom(path, policy, None, engine_config, http, configure).await;
        s._dir = Some(dir);
        s
    }

    /// A server whose gateway uses `dir` (shared by replicas) and Redis if given.
    pub async fn start_in(dir: PathBuf, policy: &str, redis: Option<String>) -> GatewayServer {
        GatewayServer::start_in_with(dir, policy, redis, |_| {}).await
    }

    /// `start_in`, with the gateway settings changed by `configure`.
    pub async fn start_in_with(
        dir: PathBuf,
        policy: &str,
        redis: Option<String>,
        configure: impl FnOnce(&mut GatewayConfig),
    ) -> GatewayServer {
        let engine = engine_config(MODEL);
        let http = HttpLimits::default();
        GatewayServer::start_custom(dir, policy, redis, engine, http, configure).await
    }

    async fn start_custom(
        dir: PathBuf,
        policy: &str,
        redis: Option<String>,
        engine_config: pagoda_runtime::EngineConfig,
        http: HttpLimits,
        configure: impl FnOnce(&mut GatewayConfig),
    ) -> GatewayServer {
        let policy_path = dir.join("gateway.toml");
        std::fs::write(&policy_path, policy).unwrap();
        let db = dir.join("gateway.db");
        let mut config = GatewayConfig::new(db.clone());
        config.policy = Some(policy_path.clone());
        config.redis_url = redis;
        config.reload_every = Duration::from_millis(50);
        configure(&mut config);
        let gateway = Gateway::open(config).await.unwrap();
        let template = load_chat_template(&engine_config.model_dir, None).unwrap();
        let engine = pagoda_runtime::start(engine_config).unwrap();
        let state = AppState::with_engine(vec![MODEL.to_string()], engine.clone(), template);
        state.set_gateway(gateway.clone());
        let server = TestServer::start_http(state, engine, Duration::from_secs(10), http).await;
        GatewayServer {
            server,
            gateway,
            db,
            policy: policy_path,
            _dir: None,
        }
    }

    pub fn key(&self, tenant: &str) -> String {
        let (_, key) = self
            .gateway
            .keys()
            .create(&TenantId::new(tenant), None, None)
            .unwrap();
        key.reveal().to_string()
    }

    pub async fn post(&self, key: Option<&str>, path: &str, body: Value) -> Reply {
        post(&self.server.client, &self.server.url(path), key, body).await
    }

    pub async fn get(&self, key: Option<&str>, path: &str) -> Reply {
        let mut request = self.server.client.get(self.server.url(path));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.unwrap();
        reply(response).await
    }
}

pub async fn post(client: &reqwest::Client, url: &str, key: Option<&str>, body: Value) -> Reply {
    let mut request = client.post(url).json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    reply(request.send().await.unwrap()).await
}

async fn reply(response: reqwest::Response) -> Reply {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    Reply {
        status,
        headers,
        json,
    }
}

pub fn dec(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

/// What a response's usage costs at `PRICES`, computed here independently of the gateway.
pub fn cost_of(usage: &Value) -> Decimal {
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    let cached = usage["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    let completion = usage["completion_tokens"].as_u64().unwrap();
    (Decimal::from(prompt - cached) * dec("0.50")
        + Decimal::from(cached) * dec("0.05")
        + Decimal::from(completion) * dec("1.50"))
        / Decimal::from(1_000_000u64)
}
