//! Talking to the target: OpenAI chat completions, non-streamed.

use std::time::Duration;

use serde_json::{json, Value};

use crate::detect::Reply;
use crate::error::RedteamError;

/// What one request came back with.
#[derive(Debug, Clone)]
pub enum Outcome {
    Reply(Reply),
    /// HTTP 400 from a guardrail (code names it): the attack was stopped.
    Blocked(String),
    /// Anything else (network, 5xx, other 4xx): not counted in the rate.
    Failed(String),
}

/// Error codes guardrails answer with; a 400 carrying one is a blocked attack.
const GUARDRAIL_CODES: [&str; 5] = [
    "prompt_injection_detected",
    "pii_detected",
    "content_filter",
    "content_policy_violation",
    "guardrail_blocked",
];

pub struct Client {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    model: Option<String>,
    max_tokens: u32,
}

impl Client {
    pub fn new(
        target: &str,
        api_key: Option<String>,
        model: Option<String>,
        max_tokens: u32,
    ) -> Result<Client, RedteamError> {
        let base = target
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_string();
        let url = reqwest::Url::parse(&base).map_err(|_| RedteamError::Target(target.into()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(RedteamError::Target(target.into()));
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|e| RedteamError::Unreachable {
                url: base.clone(),
                reason: e.to_string(),
            })?;
        Ok(Client {
            http,
            base,
            api_key,
            model,
            max_tokens,
        })
    }

    /// The model to name in requests: `--model`, else the first the target lists, else none
    /// (servers such as Pagoda then use their own).
    pub async fn resolve_model(&mut self) -> Result<(), RedteamError> {
        if self.model.is_some() {
            return Ok(());
        }
        let url = format!("{}/v1/models", self.base);
        let mut req = self.http.get(&url);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| RedteamError::Unreachable {
            url: url.clone(),
            reason: e.without_url().to_string(),
        })?;
        if let Ok(body) = resp.json::<Value>().await {
            self.model = body["data"][0]["id"].as_str().map(str::to_string);
        }
        Ok(())
    }

    pub async fn chat(&self, messages: &[Value], tools: &[String]) -> Outcome {
        let mut body = json!({
            "messages": messages,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
        });
        if let Some(m) = &self.model {
            body["model"] = json!(m);
        }
        if !tools.is_empty() {
            body["tools"] = Value::Array(tools.iter().map(|t| tool_schema(t)).collect());
        }
        let mut req = self
            .http
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&body);
        if let Some(k) = &self.api_key {
            req = req.bearer_auth(k);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => return Outcome::Failed(e.without_url().to_string()),
        };
        let status = resp.status();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        if status == reqwest::StatusCode::BAD_REQUEST {
            let code = body["error"]["code"].as_str().unwrap_or_default();
            if GUARDRAIL_CODES.contains(&code) {
                return Outcome::Blocked(code.to_string());
            }
        }
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or_default();
            return Outcome::Failed(format!("HTTP {}: {message}", status.as_u16()));
        }
        let message = &body["choices"][0]["message"];
        let tool_calls = message["tool_calls"]
            .as_array()
            .map(|calls| {
                calls
                    .iter()
                    .filter_map(|c| c["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        Outcome::Reply(Reply {
            text: message["content"].as_str().unwrap_or_default().to_string(),
            tool_calls,
        })
    }
}

fn tool_schema(name: &str) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": format!("The {name} tool."),
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                "required": ["to", "body"]
            }
        }
    })
}
