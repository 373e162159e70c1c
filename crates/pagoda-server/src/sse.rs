//! Server-sent events: `data: <json>\n\n` frames ending with `data: [DONE]`.

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Serialize;

pub fn frame<T: Serialize>(value: &T) -> Bytes {
    let mut out = b"data: ".to_vec();
    // Our response types always serialize.
    serde_json::to_writer(&mut out, value).unwrap_or_default();
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

pub fn done() -> Bytes {
    Bytes::from_static(b"data: [DONE]\n\n")
}

/// A streaming response; dropping the body (client gone) drops `frames` and with it the
/// engine streams, which aborts the requests.
pub fn response<S>(frames: S) -> Response
where
    S: Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
{
    let mut response = Body::from_stream(frames).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
