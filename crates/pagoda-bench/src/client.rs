//! Streaming client for OpenAI-compatible `/v1/completions` and `/v1/chat/completions`.
//!
//! One pooled HTTP/1.1 client is shared by all in-flight requests: keep-alive connections
//! are reused, so at high request rates the cost per request is a write and a few reads.

use crate::error::BenchError;
use crate::record::{Failure, FailureKind};
use crate::sse::{SseEvent, SseParser};
use crate::workload::{render_prompt, Message};
use futures::StreamExt;
use serde::Deserialize;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiEndpoint {
    /// `/v1/completions`, the prompt sent as one string.
    Completions,
    /// `/v1/chat/completions`, the history sent as messages.
    Chat,
}

#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Server root such as `http://127.0.0.1:8000` (with or without a trailing `/v1`).
    pub base_url: String,
    pub model: String,
    pub endpoint: ApiEndpoint,
    /// Ask the server to keep generating past end-of-sequence (a vLLM extension).
    pub ignore_eos: bool,
    pub api_key: Option<String>,
    pub request_timeout: Duration,
}

/// What the stream delivered, before token counting.
#[derive(Debug, Clone)]
pub struct StreamedResponse {
    /// Arrival of each non-empty content chunk, measured from the send.
    pub chunk_times: Vec<Duration>,
    pub e2e: Duration,
    pub text: String,
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<Usage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    /// Completions endpoint.
    text: Option<String>,
    finish_reason: Option<String>,
    /// Chat endpoint.
    delta: Option<ChunkDelta>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    content: Option<String>,
    /// Reasoning models stream their thinking here first; it is output all the same.
    reasoning_content: Option<String>,
}

pub struct StreamingClient {
    http: reqwest::Client,
    url: String,
    config: ClientConfig,
}

impl StreamingClient {
    pub fn new(config: ClientConfig) -> Result<Self, BenchError> {
        let http = reqwest::Client::builder()
            // Benchmarks target a known endpoint; an environment proxy would distort them.
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(usize::MAX)
            // Servers commonly close idle keep-alive connections after 5 s; dropping ours
            // first avoids sending a request on a connection the server is closing.
            .pool_idle_timeout(Duration::from_secs(3))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| BenchError::HttpClient(e.to_string()))?;
        let root = config.base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        let path = match config.endpoint {
            ApiEndpoint::Completions => "/v1/completions",
            ApiEndpoint::Chat => "/v1/chat/completions",
        };
        Ok(Self {
            http,
            url: format!("{root}{path}"),
            config,
        })
    }

    pub fn endpoint(&self) -> ApiEndpoint {
        self.config.endpoint
    }

    fn request_body(&self, history: &[Message], max_tokens: u32) -> serde_json::Value {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "max_tokens": max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if self.config.ignore_eos {
            body["ignore_eos"] = true.into();
        }
        match self.config.endpoint {
            ApiEndpoint::Completions => body["prompt"] = render_prompt(history).into(),
            ApiEndpoint::Chat => {
                body["messages"] = serde_json::to_value(history).unwrap_or_default();
            }
        }
        body
    }

    /// Sends one request and reads its stream to the end, timing every content chunk.
    pub async fn stream(
        &self,
        history: &[Message],
        max_tokens: u32,
    ) -> Result<StreamedResponse, Failure> {
        let body = self.request_body(history, max_tokens);
        let start = Instant::now();
        let result =
            tokio::time::timeout(self.config.request_timeout, self.send_and_read(body, start))
                .await;
        result.unwrap_or_else(|_| {
            Err(Failure {
                kind: FailureKind::Timeout,
                message: format!(
                    "no complete response within {:?}",
                    self.config.request_timeout
                ),
            })
        })
    }

    async fn send_and_read(
        &self,
        body: serde_json::Value,
        start: Instant,
    ) -> Result<StreamedResponse, Failure> {
        let mut request = self
            .http
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| Failure {
            kind: FailureKind::Connect,
            message: with_causes(&e),
        })?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(Failure {
                kind: FailureKind::Status(status.as_u16()),
                message: text.chars().take(300).collect(),
            });
        }
        let mut reader = StreamReader::new(start);
        let mut bytes = response.bytes_stream();
        while let Some(piece) = bytes.next().await {
            let piece = piece.map_err(|e| Failure {
                kind: FailureKind::Stream,
                message: with_causes(&e),
            })?;
            if reader.feed(&piece)? {
                break;
            }
        }
        reader.finish()
    }
}

/// Turns SSE bytes into timed content chunks.
struct StreamReader {
    start: Instant,
    parser: SseParser,
    events: Vec<SseEvent>,
    response: StreamedResponse,
    /// When a choice first reported its finish reason.
    finished_at: Option<Duration>,
}

impl StreamReader {
    fn new(start: Instant) -> Self {
        Self {
            start,
            parser: SseParser::new(),
            events: Vec::new(),
            response: StreamedResponse {
                chunk_times: Vec::new(),
                e2e: Duration::ZERO,
                text: String::new(),
                usage: None,
            },
            finished_at: None,
        }
    }

    /// Returns `true` once `[DONE]` was seen.
    fn feed(&mut self, bytes: &[u8]) -> Result<bool, Failure> {
        // All events in one network read arrived together, so they share one timestamp.
        let now = self.start.elapsed();
        self.parser.feed(bytes, &mut self.events);
        self.drain_events(now)
    }

    fn finish(mut self) -> Result<StreamedResponse, Failure> {
        let now = self.start.elapsed();
        self.parser.finish(&mut self.events);
        self.drain_events(now)?;
        self.response.e2e = self.start.elapsed();
        let produced = self
            .response
            .usage
            .and_then(|u| u.completion_tokens)
            .is_some_and(|n| n > 0);
        if let (true, true, Some(at)) = (
            self.response.chunk_times.is_empty(),
            produced,
            self.finished_at,
        ) {
            // The model did produce tokens, with no visible text (a special token, or a
            // lone byte of a character): the request succeeded, and its first token is the
            // finishing chunk.
            self.response.chunk_times.push(at);
        }
        if self.response.chunk_times.is_empty() {
            return Err(Failure {
                kind: FailureKind::EmptyOutput,
                message: "the stream ended without any content".into(),
            });
        }
        Ok(self.response)
    }

    fn drain_events(&mut self, now: Duration) -> Result<bool, Failure> {
        let mut done = false;
        for event in self.events.drain(..) {
            let data = match event {
                SseEvent::Done => {
                    done = true;
                    continue;
                }
                SseEvent::Data(data) => data,
            };
            let chunk: StreamChunk = serde_json::from_str(&data).map_err(|e| Failure {
                kind: FailureKind::Stream,
                message: format!("bad stream chunk ({e}): {}", truncate(&data)),
            })?;
            if let Some(error) = chunk.error {
                return Err(Failure {
                    kind: FailureKind::Stream,
                    message: format!("error in stream: {}", truncate(&error.to_string())),
                });
            }
            if chunk.usage.is_some() {
                self.response.usage = chunk.usage;
            }
            if self.finished_at.is_none() && chunk.choices.iter().any(|c| c.finish_reason.is_some())
            {
                self.finished_at = Some(now);
            }
            let content: String = chunk
                .choices
                .into_iter()
                .filter_map(|choice| {
                    choice
                        .text
                        .or_else(|| choice.delta.and_then(|d| d.content.or(d.reasoning_content)))
                })
                .collect();
            if !content.is_empty() {
                self.response.chunk_times.push(now);
                self.response.text.push_str(&content);
            }
        }
        Ok(done)
    }
}

/// The error and its chain of causes: reqwest's own message alone rarely says what broke.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

fn truncate(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(pieces: &[&str]) -> Result<StreamedResponse, Failure> {
        let mut reader = StreamReader::new(Instant::now());
        for piece in pieces {
            if reader.feed(piece.as_bytes())? {
                break;
            }
        }
        reader.finish()
    }

    #[test]
    fn role_only_chat_delta_is_not_the_first_token() {
        let response = read_all(&[
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n",
            "data: [DONE]\n\n",
        ])
        .unwrap();
        assert_eq!(response.chunk_times.len(), 2);
        assert_eq!(response.text, "Hi there");
        assert_eq!(response.usage.unwrap().completion_tokens, Some(2));
    }

    #[test]
    fn completions_text_chunks_are_collected() {
        let response = read_all(&[
            "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[{\"text\":\"b\"}]}\n\n",
            "data: [DONE]\n\n",
        ])
        .unwrap();
        assert_eq!(response.text, "ab");
        assert!(response.usage.is_none());
    }

    #[test]
    fn error_object_in_the_stream_fails_the_request() {
        let failure =
            read_all(&["data: {\"error\":{\"message\":\"overloaded\"}}\n\n"]).unwrap_err();
        assert_eq!(failure.kind, FailureKind::Stream);
        assert!(failure.message.contains("overloaded"));
    }

    #[test]
    fn stream_without_content_is_an_empty_output_failure() {
        let failure = read_all(&["data: [DONE]\n\n"]).unwrap_err();
        assert_eq!(failure.kind, FailureKind::EmptyOutput);
    }

    #[test]
    fn tokens_without_visible_text_are_not_a_failure() {
        let response = read_all(&[
            "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n",
        ])
        .unwrap();
        assert_eq!(response.chunk_times.len(), 1);
        assert_eq!(response.text, "");
        // Without usage there is no sign a token was made: still a failure.
        let failure = read_all(&[
            "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        ])
        .unwrap_err();
        assert_eq!(failure.kind, FailureKind::EmptyOutput);
    }

    #[test]
    fn malformed_chunk_is_a_stream_failure() {
        let failure = read_all(&["data: {not json\n\n"]).unwrap_err();
        assert_eq!(failure.kind, FailureKind::Stream);
    }
}
