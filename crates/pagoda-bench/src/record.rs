//! What one request did, as measured by the client.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Where a token count came from, so reports can say how much to trust it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage` field.
    Usage,
    /// The model's tokenizer run over the text (`--tokenizer`).
    Tokenizer,
    /// Neither was available: one token per streamed content chunk, or per prompt word.
    Estimate,
}

/// Why a request failed; the key under which failures are counted in reports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureKind {
    /// The server answered with this non-success HTTP status.
    Status(u16),
    /// No connection could be made or it broke before the response started.
    Connect,
    /// The request took longer than `--request-timeout-s`.
    Timeout,
    /// The stream broke, carried an error object or was not valid JSON.
    Stream,
    /// The stream finished without a single content token.
    EmptyOutput,
}

impl FailureKind {
    /// Stable label used as the key of `errors_by_kind` in reports and JSON.
    pub fn label(&self) -> String {
        match self {
            FailureKind::Status(code) => format!("http_{code}"),
            FailureKind::Connect => "connect".into(),
            FailureKind::Timeout => "timeout".into(),
            FailureKind::Stream => "stream".into(),
            FailureKind::EmptyOutput => "empty_output".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

/// Latencies and token counts of a request that streamed to the end.
#[derive(Debug, Clone)]
pub struct Success {
    /// Send to first non-empty content delta.
    pub ttft: Duration,
    /// Gaps between consecutive content chunks after the first.
    pub inter_token: Vec<Duration>,
    /// Send to end of stream.
    pub e2e: Duration,
    pub input_tokens: u64,
    pub input_source: TokenSource,
    pub output_tokens: u64,
    pub output_source: TokenSource,
}

impl Success {
    /// Time per output token after the first: `(e2e - ttft) / (output_tokens - 1)`.
    /// `None` for single-token outputs, where it is undefined.
    pub fn tpot(&self) -> Option<Duration> {
        (self.output_tokens > 1)
            .then(|| (self.e2e - self.ttft).div_f64((self.output_tokens - 1) as f64))
    }
}

#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// Send time, from the start of the measured run.
    pub sent_at: Duration,
    pub outcome: Result<Success, Failure>,
}

/// One line of `requests.jsonl`: a request as measured, for analyses the summary cannot do
/// (e.g. leaving out the first wave of a closed loop).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RequestLine {
    /// The load level, as printed in the report.
    pub level: String,
    /// Send time in seconds from the start of the measured run.
    pub sent_s: f64,
    /// The failure's label (`http_429`, `timeout`, ...) or null.
    pub error: Option<String>,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

impl RequestLine {
    pub fn of(level: &str, record: &RequestRecord) -> RequestLine {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (error, success) = match &record.outcome {
            Ok(s) => (None, Some(s)),
            Err(f) => (Some(f.kind.label()), None),
        };
        RequestLine {
            level: level.to_string(),
            sent_s: record.sent_at.as_secs_f64(),
            error,
            ttft_ms: success.map(|s| ms(s.ttft)),
            e2e_ms: success.map(|s| ms(s.e2e)),
            input_tokens: success.map(|s| s.input_tokens),
            output_tokens: success.map(|s| s.output_tokens),
        }
    }
}
