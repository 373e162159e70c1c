//! A minimal OpenAI-compatible streaming server with known latencies.
//!
//! The integration tests compare what the client measures against the delays configured
//! here, and the throughput example drives it with no delays to show the client is not the
//! bottleneck. Delays can also grow with the requests in flight, which gives the goodput
//! search a real rate at which the SLO stops being met. It listens on 127.0.0.1 only.

use crate::error::BenchError;
use bytes::Bytes;
use futures::stream;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Every `every`-th request (counting from 1, in arrival order) gets `status`.
#[derive(Debug, Clone, Copy)]
pub struct FailureRule {
    pub every: u64,
    pub status: u16,
}

#[derive(Debug, Clone)]
pub struct MockServerConfig {
    /// Delay before the first token; request `n` (from 1, arrival order) waits
    /// `ttft_cycle[(n - 1) % len]`, so tests know each request's latency.
    pub ttft_cycle: Vec<Duration>,
    /// Delay between tokens.
    pub itl: Duration,
    /// Extra delay before the first token per other request in flight when this one
    /// arrives, so latency grows with load like a real server's and a rate search has a
    /// rate to find.
    pub ttft_per_in_flight: Duration,
    /// Extra delay between tokens per other request in flight at that moment.
    pub itl_per_in_flight: Duration,
    /// Tokens per reply; `None` honours each request's `max_tokens`.
    pub output_tokens: Option<u32>,
    /// Checked in order; the first matching rule decides.
    pub failures: Vec<FailureRule>,
    /// Whether to end with a `usage` chunk (as `stream_options.include_usage` asks).
    pub send_usage: bool,
    /// Send each event as its own HTTP chunk even when there is no delay to wait for
    /// (otherwise a reply without delays goes out in one write).
    pub frame_per_event: bool,
}

impl Default for MockServerConfig {
    fn default() -> Self {
        Self {
            ttft_cycle: vec![Duration::ZERO],
            itl: Duration::ZERO,
            ttft_per_in_flight: Duration::ZERO,
            itl_per_in_flight: Duration::ZERO,
            output_tokens: None,
            failures: Vec::new(),
            send_usage: true,
            frame_per_event: false,
        }
    }
}

/// A running mock server; stops accepting connections when dropped.
pub struct MockServer {
    addr: SocketAddr,
    received: Arc<AtomicU64>,
    accept_loop: JoinHandle<()>,
}

struct State {
    config: MockServerConfig,
    received: Arc<AtomicU64>,
    /// Replies being streamed now.
    in_flight: Arc<AtomicU64>,
}

/// Counts a reply as in flight until its stream ends or the client drops it.
struct InFlight(Arc<AtomicU64>);

impl InFlight {
    fn enter(counter: &Arc<AtomicU64>) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter.clone())
    }

    /// Requests in flight besides this one.
    fn others(&self) -> u32 {
        let n = self.0.load(Ordering::Relaxed).saturating_sub(1);
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The delays of one reply: fixed parts plus parts that grow with the requests in flight.
#[derive(Clone, Copy)]
struct Delays {
    ttft: Duration,
    itl: Duration,
    itl_per_in_flight: Duration,
}

#[derive(Deserialize)]
struct MockRequest {
    max_tokens: Option<u32>,
    prompt: Option<String>,
    #[serde(default)]
    messages: Vec<MockMessage>,
}

#[derive(Deserialize)]
struct MockMessage {
    content: String,
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

impl MockServer {
    /// Binds an ephemeral port on 127.0.0.1 and serves on the current tokio runtime.
    pub async fn start(config: MockServerConfig) -> Result<Self, BenchError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(BenchError::MockServer)?;
        let addr = listener.local_addr().map_err(BenchError::MockServer)?;
        let received = Arc::new(AtomicU64::new(0));
        let state = Arc::new(State {
            config,
            received: received.clone(),
            in_flight: Arc::new(AtomicU64::new(0)),
        });
        let accept_loop = tokio::spawn(accept_connections(listener, state));
        Ok(Self {
            addr,
            received,
            accept_loop,
        })
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Completion requests received so far, warm-up and failed ones included.
    pub fn requests_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

async fn accept_connections(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let _ = socket.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(respond(&state, request).await) }
            });
            // A client hanging up mid-stream is normal at the end of a benchmark.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

async fn respond(state: &State, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    let chat = path.ends_with("/chat/completions");
    if !chat && !path.ends_with("/completions") {
        return match path.as_str() {
            "/v1/models" | "/health" => json_response(
                StatusCode::OK,
                r#"{"object":"list","data":[{"id":"mock","object":"model"}]}"#.into(),
            ),
            _ => json_response(StatusCode::NOT_FOUND, r#"{"error":"not found"}"#.into()),
        };
    }
    let n = state.received.fetch_add(1, Ordering::Relaxed) + 1;
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return json_response(StatusCode::BAD_REQUEST, String::new()),
    };
    if let Some(rule) = state
        .config
        .failures
        .iter()
        .find(|r| n.is_multiple_of(r.every))
    {
        let status = StatusCode::from_u16(rule.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let message = format!(r#"{{"error":{{"message":"mock failure for request {n}"}}}}"#);
        return json_response(status, message);
    }
    let Ok(parsed) = serde_json::from_slice::<MockRequest>(&body) else {
        return json_response(StatusCode::BAD_REQUEST, r#"{"error":"bad json"}"#.into());
    };
    let prompt_tokens = match &parsed.prompt {
        Some(prompt) => prompt.split_whitespace().count(),
        None => parsed
            .messages
            .iter()
            .map(|m| m.content.split_whitespace().count())
            .sum(),
    };
    let tokens = state
        .config
        .output_tokens
        .or(parsed.max_tokens)
        .unwrap_or(16);
    let config = &state.config;
    let in_flight = InFlight::enter(&state.in_flight);
    let cycle = &config.ttft_cycle;
    let delays = Delays {
        ttft: cycle[((n - 1) % cycle.len() as u64) as usize]
            + config.ttft_per_in_flight * in_flight.others(),
        itl: config.itl,
        itl_per_in_flight: config.itl_per_in_flight,
    };
    let events = sse_events(chat, tokens, prompt_tokens, config.send_usage);
    let one_write = !config.frame_per_event
        && delays.ttft.is_zero()
        && delays.itl.is_zero()
        && delays.itl_per_in_flight.is_zero();
    stream_response(events, tokens as usize, delays, in_flight, one_write)
}

fn json_response(status: StatusCode, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .expect("static response parts are valid")
}

/// The SSE events of one reply: one per token, the usage chunk, then `[DONE]`.
fn sse_events(chat: bool, tokens: u32, prompt_tokens: usize, usage: bool) -> Vec<Bytes> {
    let token_event = if chat {
        "data: {\"object\":\"chat.completion.chunk\",\"model\":\"mock\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok\"},\"finish_reason\":null}]}\n\n"
    } else {
        "data: {\"object\":\"text_completion\",\"model\":\"mock\",\"choices\":[{\"index\":0,\"text\":\" tok\",\"finish_reason\":null}]}\n\n"
    };
    let mut events: Vec<Bytes> = (0..tokens)
        .map(|_| Bytes::from_static(token_event.as_bytes()))
        .collect();
    if usage {
        events.push(Bytes::from(format!(
            "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\n",
            prompt_tokens + tokens as usize
        )));
    }
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

fn stream_response(
    events: Vec<Bytes>,
    token_count: usize,
    delays: Delays,
    in_flight: InFlight,
    one_write: bool,
) -> Response<Body> {
    let builder = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache");
    if one_write {
        // Nothing to wait for: one write is what a fast server would do.
        let joined: Vec<u8> = events.concat();
        return builder
            .body(Full::new(Bytes::from(joined)).boxed_unsync())
            .expect("static response parts are valid");
    }
    // The in-flight guard lives in the stream's state: it is released when the last event
    // has gone out or the client hangs up.
    let frames = stream::unfold(
        (events.into_iter().enumerate(), in_flight),
        move |(mut events, in_flight)| async move {
            let (i, event) = events.next()?;
            // First token after TTFT, each later token ITL after the previous one; the
            // usage and [DONE] events follow the last token at once.
            let delay = match i {
                0 => delays.ttft,
                i if i < token_count => delays.itl + delays.itl_per_in_flight * in_flight.others(),
                _ => Duration::ZERO,
            };
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((Ok::<_, Infallible>(Frame::data(event)), (events, in_flight)))
        },
    );
    builder
        .body(StreamBody::new(frames).boxed_unsync())
        .expect("static response parts are valid")
}
