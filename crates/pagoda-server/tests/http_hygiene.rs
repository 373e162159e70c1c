//! Connection deadlines and the connection cap: slow or silent clients cannot hold the
//! server's connections or the engine's resources. Raw sockets, so that the tests control
//! exactly what is sent, and when.

mod common;

use std::time::Duration;

use common::{engine_config, TestServer, MODEL};
use pagoda_server::{load_chat_template, AppState, HttpLimits};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{sleep, timeout, Instant};

const GET_HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nhost: pagoda\r\n\r\n";

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Deadlines long enough not to matter unless a test shortens one.
fn relaxed() -> HttpLimits {
    HttpLimits {
        header_timeout: Duration::from_secs(5),
        keep_alive_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        write_timeout: Duration::from_secs(5),
        max_connections: 64,
    }
}

async fn start(http: HttpLimits) -> TestServer {
    let config = engine_config(MODEL);
    let template = load_chat_template(&config.model_dir, None).unwrap();
    let engine = pagoda_runtime::start(config).unwrap();
    let state = AppState::with_engine(vec![MODEL.to_string()], engine.clone(), template);
    TestServer::start_http(state, engine, Duration::from_secs(5), http).await
}

fn address(server: &TestServer) -> String {
    server.base.trim_start_matches("http://").to_string()
}

async fn connect(server: &TestServer) -> TcpStream {
    TcpStream::connect(address(server)).await.unwrap()
}

/// One response: its status and body (the server answers these with a Content-Length).
async fn read_response(stream: &mut (impl AsyncRead + Unpin)) -> (u16, String) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed before a response: {:?}",
            String::from_utf8_lossy(&data)
        );
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(data[..head_end].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no content-length in {head}"));
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed in the middle of a response");
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8(data[head_end..head_end + length].to_vec()).unwrap();
    (status, body)
}

/// How long until the server closes the connection (reading and dropping whatever it
/// still sends); fails if it is still open after `limit`.
async fn closed_after(stream: &mut (impl AsyncRead + Unpin), limit: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let closed = timeout(limit, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the connection is still open after {limit:?}"
    );
    start.elapsed()
}

#[tokio::test]
async fn half_sent_headers_are_closed_after_the_header_timeout() {
    let server = start(HttpLimits {
        header_timeout: ms(300),
        ..relaxed()
    })
    .await;

    // Headers trickled a line at a time never complete: the bytes coming in do not extend
    // the deadline.
    let (mut reader, mut writer) = connect(&server).await.into_split();
    writer
        .write_all(b"GET /health HTTP/1.1\r\nhost: pagoda\r\n")
        .await
        .unwrap();
    let trickle = tokio::spawn(async move {
        loop {
            sleep(ms(50)).await;
            if writer.write_all(b"x-slow: 1\r\n").await.is_err() {
                break;
            }
        }
    });
    let elapsed = closed_after(&mut reader, Duration::from_secs(3)).await;
    trickle.abort();
    assert!(
        elapsed >= ms(250) && elapsed < ms(1500),
        "closed after {elapsed:?}"
    );

    // A connection that sends nothing at all is closed too.
    let mut silent = connect(&server).await;
    let elapsed = closed_after(&mut silent, Duration::from_secs(3)).await;
    assert!(
        elapsed >= ms(250) && elapsed < ms(1500),
        "closed after {elapsed:?}"
    );

    // Complete headers in time are served.
    let mut prompt = connect(&server).await;
    prompt.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut prompt).await.0, 200);
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed_after_the_keep_alive_timeout() {
    let server = start(HttpLimits {
        header_timeout: ms(300),
        keep_alive_timeout: ms(1000),
        ..relaxed()
    })
    .await;
    let mut stream = connect(&server).await;
    stream.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut stream).await.0, 200);
    // Idle for longer than the header timeout: the keep-alive timeout is what applies.
    sleep(ms(600)).await;
    stream.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut stream).await.0, 200);
    let elapsed = closed_after(&mut stream, Duration::from_secs(4)).await;
    assert!(
        elapsed >= ms(900) && elapsed < ms(2500),
        "closed after {elapsed:?} idle"
    );

    // The next request's headers, once begun, must complete within the header timeout.
    let mut stream = connect(&server).await;
    stream.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut stream).await.0, 200);
    sleep(ms(100)).await;
    stream.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
    let elapsed = closed_after(&mut stream, Duration::from_secs(4)).await;
    assert!(
        elapsed >= ms(250) && elapsed < ms(900),
        "closed after {elapsed:?}"
    );
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_gets_408_and_the_connection_closes() {
    let server = start(HttpLimits {
        body_timeout: ms(400),
        ..relaxed()
    })
    .await;
    let (mut reader, mut writer) = connect(&server).await.into_split();
    let start = Instant::now();
    writer
        .write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: pagoda\r\n\
              content-type: application/json\r\ncontent-length: 200\r\n\r\n{\"model\":",
        )
        .await
        .unwrap();
    // A byte at a time: the deadline bounds the whole body, not the pauses.
    let trickle = tokio::spawn(async move {
        loop {
            sleep(ms(50)).await;
            if writer.write_all(b" ").await.is_err() {
                break;
            }
        }
    });
    let (status, body) = timeout(Duration::from_secs(3), read_response(&mut reader))
        .await
        .expect("no answer to a stalled body");
    let elapsed = start.elapsed();
    assert_eq!(status, 408, "{body}");
    assert!(
        elapsed >= ms(350) && elapsed < ms(2000),
        "answered after {elapsed:?}"
    );
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        error,
        json!({"error": {
            "message": "the request body did not arrive within the body timeout",
            "type": "invalid_request_error",
            "param": null,
            "code": "request_timeout",
        }})
    );
    closed_after(&mut reader, Duration::from_secs(2)).await;
    trickle.abort();

    // A body sent at once is not affected, and neither is a handler slower than the
    // timeout once the body is in.
    let (status, _) = server
        .post("/v1/chat/completions", common::chat_body("Hi", 4))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let server = start(HttpLimits {
        max_connections: 2,
        ..relaxed()
    })
    .await;
    let mut first = connect(&server).await;
    first.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut first).await.0, 200);
    let mut second = connect(&server).await;
    second.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut second).await.0, 200);

    // The kernel completes the handshake, but the server does not take the connection.
    let mut third = connect(&server).await;
    third.write_all(GET_HEALTH).await.unwrap();
    assert!(
        timeout(ms(400), read_response(&mut third)).await.is_err(),
        "a third connection was served while two were open"
    );
    drop(first);
    let (status, _) = timeout(Duration::from_secs(2), read_response(&mut third))
        .await
        .expect("the waiting connection is served once one closes");
    assert_eq!(status, 200);

    drop(second);
    drop(third);
    let health = timeout(
        Duration::from_secs(2),
        server.client.get(server.url("/health")).send(),
    )
    .await
    .expect("/health answers once the connections are gone")
    .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_streaming_client_that_stops_reading_is_cut_off_and_its_request_aborted() {
    let server = start(HttpLimits {
        write_timeout: ms(300),
        ..relaxed()
    })
    .await;
    // A small receive window, so the server's writes block soon.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket
        .connect(address(&server).parse().unwrap())
        .await
        .unwrap();
    // Many large chunks (32 choices with 20 top logprobs each), far more than the socket
    // buffers hold, over a generation that takes longer than filling them.
    let body = json!({
        "model": MODEL,
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 400,
        "n": 32,
        "logprobs": true,
        "top_logprobs": 20,
        "stream": true,
        "ignore_eos": true,
    })
    .to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: pagoda\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();

    let start = Instant::now();
    while server.engine.num_in_flight() == 0 {
        assert!(start.elapsed() < Duration::from_secs(3), "never started");
        sleep(ms(5)).await;
    }
    // Not reading a byte: the request must end anyway, long before its 400 tokens.
    while server.engine.num_in_flight() > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(12),
            "still running after 12s: {:?}",
            server.engine.stats()
        );
        sleep(ms(10)).await;
    }
    server.wait_idle().await;
    let (_, metrics) = server.get_text("/metrics").await;
    let finished = |reason: &str| {
        let prefix = format!(
            "pagoda:request_success_total{{model_name=\"{MODEL}\",finished_reason=\"{reason}\"}}"
        );
        metrics
            .lines()
            .find(|l| l.starts_with(&prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert!(
        finished("abort") > 0.0 && finished("length") == 0.0,
        "the request was not aborted:\n{metrics}"
    );
    assert_eq!(server.metric("pagoda:kv_cache_blocks_used").await, 0.0);

    // The server closed the connection: what was buffered arrives, then the end, never [DONE].
    let mut received = Vec::new();
    let drained = timeout(Duration::from_secs(5), async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "the connection is still open");
    assert!(!String::from_utf8_lossy(&received).contains("data: [DONE]"));

    let (status, _) = server
        .post("/v1/chat/completions", common::chat_body("Hi", 4))
        .await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn shutdown_closes_idle_connections_at_once() {
    let mut server = start(HttpLimits::default()).await;
    let mut idle = connect(&server).await;
    idle.write_all(GET_HEALTH).await.unwrap();
    assert_eq!(read_response(&mut idle).await.0, 200);
    let stopped = server.begin_shutdown();
    // Well within the 60 s keep-alive timeout and the 5 s drain timeout.
    closed_after(&mut idle, Duration::from_secs(1)).await;
    timeout(Duration::from_secs(1), stopped)
        .await
        .expect("serve returned once the idle connection closed")
        .unwrap()
        .unwrap();
}
