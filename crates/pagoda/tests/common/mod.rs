//! Shared by the tests that drive the real `pagoda serve` binary with hostile input: starting a
//! server on the tiny fixture model, a raw HTTP/1.1 client (so malformed bodies and slow
//! headers can be sent byte for byte), and the checks every response and every case share.
#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The model name the fixture server is served as.
pub const MODEL: &str = "tiny-qwen2";
/// Token ids of the fixture tokenizer are 0..VOCAB (config.json `vocab_size`).
pub const VOCAB: usize = 1024;

/// How long one response may take before the client gives up (a hung server fails the test
/// instead of hanging it).
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// `pagoda serve` on tiny-qwen2 with a port of its own; its stderr is collected as it runs and
/// it is killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    log: Arc<Mutex<String>>,
}

impl Server {
    pub fn start(extra_args: &[&str]) -> Server {
        let model =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tiny-qwen2");
        let mut command = Command::new(env!("CARGO_BIN_EXE_pagoda"));
        command
            .args(["serve", "--model"])
            .arg(model)
            .args([
                "--served-model-name",
                MODEL,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--kv-cache-memory",
                "32MiB",
            ])
            .args(extra_args)
            .env("RUST_LOG", "info");
        let (child, port, log) = spawn_and_wait_for_port(command);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut server = Server { child, port, log };
        while server.get("/health").status != 200 {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("pagoda serve exited with {status}:\n{}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "server not healthy:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// Everything the server has written to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The lines of the log that report a panic (on any thread).
    pub fn panic_lines(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("panicked"))
            .map(str::to_string)
            .collect()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and waits for the exit.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then waits for the drain and exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child.wait().unwrap()
    }

    pub fn get(&self, path: &str) -> Response {
        request(self.port, "GET", path, b"")
    }

    pub fn post(&self, path: &str, body: &[u8]) -> Response {
        request(self.port, "POST", path, body)
    }

    /// `pagoda:kv_cache_blocks_used` from `/metrics`, or None if the line is missing.
    pub fn kv_blocks_used(&self) -> Option<f64> {
        let metrics = self.get("/metrics");
        metrics
            .body
            .lines()
            .find(|l| l.starts_with("pagoda:kv_cache_blocks_used"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// Polls `/metrics` until no KV block is held (aborted requests free theirs at the engine's
    /// next step); Err with the last value after `patience`.
    pub fn wait_blocks_free(&self, patience: Duration) -> Result<(), String> {
        let deadline = Instant::now() + patience;
        loop {
            let used = self.kv_blocks_used();
            if used == Some(0.0) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "pagoda:kv_cache_blocks_used is {used:?} after {patience:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server still serves others: `/health` is 200 and a normal 4-token request answers
    /// within `limit`; Ok(how long it took).
    pub fn liveness(&self, limit: Duration) -> Result<Duration, String> {
        let health = self.get("/health");
        if health.status != 200 {
            return Err(format!("/health is {}: {}", health.status, health.body));
        }
        let body =
            format!(r#"{{"model": "{MODEL}", "prompt": "The quick brown fox", "max_tokens": 4}}"#);
        let started = Instant::now();
        let response = self.post("/v1/completions", body.as_bytes());
        let took = started.elapsed();
        if response.status != 200 {
            return Err(format!(
                "a normal request got {}: {}",
                response.status, response.body
            ));
        }
        if let Err(e) = check_success(&response, false) {
            return Err(format!("a normal request: {e}"));
        }
        if took > limit {
            return Err(format!("a normal request took {took:?} (limit {limit:?})"));
        }
        Ok(took)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP response; `status` 0 means none came back (connection closed or reset, or the
/// read timed out: `error` says which).
#[derive(Debug, Clone, Default)]
pub struct Response {
    pub status: u16,
    pub headers: String,
    pub body: String,
    pub error: Option<String>,
}

impl Response {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    pub fn is_sse(&self) -> bool {
        self.headers
            .to_ascii_lowercase()
            .contains("content-type: text/event-stream")
    }

    /// The body shortened for a failure message.
    pub fn excerpt(&self) -> String {
        excerpt(&self.body, 600)
    }
}

/// The first sample of `name` in a /metrics text (with or without labels).
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

pub fn excerpt(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// A JSON request on its own connection.
pub fn request(port: u16, method: &str, path: &str, body: &[u8]) -> Response {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    head.extend_from_slice(body);
    raw(port, &head)
}

/// Sends `bytes` as they are on a new connection and reads the response to the end. The write
/// runs on its own thread, so a server that answers (413) before reading a large body is heard.
pub fn raw(port: u16, bytes: &[u8]) -> Response {
    raw_with_timeout(port, bytes, READ_TIMEOUT)
}

pub fn raw_with_timeout(port: u16, bytes: &[u8], read_timeout: Duration) -> Response {
    let mut stream = match TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => s,
        Err(e) => {
            return Response {
                error: Some(format!("connect: {e}")),
                ..Response::default()
            }
        }
    };
    stream.set_read_timeout(Some(read_timeout)).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let payload = bytes.to_vec();
    let sender = std::thread::spawn(move || writer.write_all(&payload));
    let mut received = Vec::new();
    let read = stream.read_to_end(&mut received);
    let _ = sender.join();
    let mut response = parse_response(&received);
    if let Err(e) = read {
        if response.status == 0 || response.error.is_none() {
            response.error = Some(format!("read: {e}"));
        }
    }
    response
}

/// Splits a raw HTTP/1.1 response into status, headers and the (de-chunked) body.
pub fn parse_response(raw: &[u8]) -> Response {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Response {
            headers: text.into_owned(),
            error: Some("no complete response head".into()),
            ..Response::default()
        };
    };
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let (body, error) = if chunked {
        match dechunk(body) {
            Ok(b) => (b, None),
            Err(partial) => (partial, Some("chunked body ended early".into())),
        }
    } else {
        (body.to_string(), None)
    };
    Response {
        status,
        headers: head.to_string(),
        body,
        error,
    }
}

/// Err(what arrived) if the terminating zero-size chunk never came.
fn dechunk(mut rest: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let Some((size_line, after)) = rest.split_once("\r\n") else {
            return Err(out);
        };
        let size_hex = size_line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size_hex, 16) else {
            return Err(out);
        };
        if size == 0 {
            return Ok(out);
        }
        if after.len() < size || !after.is_char_boundary(size) {
            out.push_str(after);
            return Err(out);
        }
        out.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
}

/// A 4xx must be OpenAI's error object: `error.message` a non-empty string, `error.type` a
/// string, `param` and `code` present (string or null). Returns the error object.
pub fn check_error_shape(response: &Response) -> Result<Value, String> {
    let Some(json) = response.json() else {
        return Err(format!(
            "status {} with a body that is not JSON: {}",
            response.status,
            response.excerpt()
        ));
    };
    let error = &json["error"];
    let ok = error["message"].as_str().is_some_and(|m| !m.is_empty())
        && error["type"].is_string()
        && error
            .get("param")
            .is_some_and(|p| p.is_string() || p.is_null())
        && error
            .get("code")
            .is_some_and(|c| c.is_string() || c.is_null());
    if !ok {
        return Err(format!(
            "status {} is not an OpenAI error object: {}",
            response.status,
            response.excerpt()
        ));
    }
    Ok(error.clone())
}

/// What a 200 carried, for cases that check more than success.
#[derive(Debug, Default)]
pub struct Success {
    /// Choices seen (by index) and their finish reasons.
    pub finish_reasons: Vec<(u64, String)>,
    /// The usage object, when the response has one (non-streamed, or `include_usage`).
    pub usage: Option<Value>,
}

/// A 200 must be a complete success: a non-streamed body is a completion whose every choice has
/// a finish reason; a stream is SSE events of JSON chunks ending in `[DONE]`, with no error event,
/// in which every choice index that appeared got a finish reason.
pub fn check_success(response: &Response, stream: bool) -> Result<Success, String> {
    if let Some(e) = &response.error {
        return Err(format!(
            "the 200 did not complete ({e}): {}",
            response.excerpt()
        ));
    }
    if stream {
        return check_stream(response);
    }
    let Some(json) = response.json() else {
        return Err(format!("a 200 that is not JSON: {}", response.excerpt()));
    };
    let Some(choices) = json["choices"].as_array() else {
        return Err(format!("a 200 without choices: {}", response.excerpt()));
    };
    if choices.is_empty() {
        return Err(format!("a 200 with no choice: {}", response.excerpt()));
    }
    let mut success = Success {
        usage: json.get("usage").cloned(),
        ..Success::default()
    };
    for choice in choices {
        let index = choice["index"].as_u64().unwrap_or(u64::MAX);
        match choice["finish_reason"].as_str() {
            Some(reason) => success.finish_reasons.push((index, reason.to_string())),
            None => {
                return Err(format!(
                    "a 200 whose choice {index} has no finish_reason: {}",
                    response.excerpt()
                ))
            }
        }
    }
    Ok(success)
}

fn check_stream(response: &Response) -> Result<Success, String> {
    if !response.is_sse() {
        // A request refused before streaming is a JSON error, never a 200.
        return Err(format!(
            "a streamed 200 that is not text/event-stream: {}",
            response.excerpt()
        ));
    }
    let mut success = Success::default();
    let mut seen: Vec<u64> = Vec::new();
    let mut done = false;
    for line in response.body.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if done {
            return Err(format!("an event after [DONE]: {}", response.excerpt()));
        }
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            return Err(format!("an SSE event that is not JSON: {data}"));
        };
        if chunk.get("error").is_some() {
            return Err(format!("the stream carried an error event: {data}"));
        }
        if let Some(usage) = chunk.get("usage").filter(|u| !u.is_null()) {
            success.usage = Some(usage.clone());
        }
        for choice in chunk["choices"].as_array().into_iter().flatten() {
            let index = choice["index"].as_u64().unwrap_or(u64::MAX);
            if !seen.contains(&index) {
                seen.push(index);
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                success.finish_reasons.push((index, reason.to_string()));
            }
        }
    }
    if !done {
        return Err(format!(
            "the stream did not end with [DONE]: {}",
            response.excerpt()
        ));
    }
    if seen.is_empty() {
        return Err(format!("a stream with no choice: {}", response.excerpt()));
    }
    for index in seen {
        if !success.finish_reasons.iter().any(|(i, _)| *i == index) {
            return Err(format!(
                "choice {index} of the stream never got a finish_reason: {}",
                response.excerpt()
            ));
        }
    }
    Ok(success)
}

/// Serializes `value` and replaces every `"@RAW:...@"` string with its contents unquoted, so
/// bodies can carry numbers JSON parsers cannot hold (`1e309`, `18446744073709551616`, `-0.0`)
/// or text serde_json would escape (a lone surrogate escape).
pub fn render(value: &Value) -> Vec<u8> {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find("\"@RAW:") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "\"@RAW:".len()..];
        let end = after.find("@\"").expect("unterminated raw marker");
        // The marker is a JSON string literal: unescape it to get the raw text back.
        let literal = format!("\"{}\"", &after[..end]);
        let raw: String = serde_json::from_str(&literal).expect("raw marker");
        out.push_str(&raw);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// A value written verbatim into the body by `render`.
pub fn raw_json(text: &str) -> Value {
    Value::String(format!("@RAW:{text}@"))
}

/// Spawns `pagoda serve` (a `--port 0` command), collects its stderr as it runs, and waits for
/// the port it reports in its `address=` log line.
pub fn spawn_and_wait_for_port(mut command: Command) -> (Child, u16, Arc<Mutex<String>>) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pagoda serve");
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().expect("stderr is piped");
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let mut log = sink.lock().unwrap();
            log.push_str(&line);
            log.push('\n');
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let port = loop {
        let text = log.lock().unwrap().clone();
        if let Some(i) = text.find("address=127.0.0.1:") {
            let rest = &text[i + "address=127.0.0.1:".len()..];
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            break digits.parse().unwrap();
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("pagoda serve exited with {status}:\n{text}");
        }
        assert!(Instant::now() < deadline, "server did not start: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    (child, port, log)
}
