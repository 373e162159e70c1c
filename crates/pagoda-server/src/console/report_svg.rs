//! `/ui/reports/svg/{name}`: a plot from the reports folder, served so that nothing in it
//! can run: a strict CSP with `sandbox`, `nosniff`, and the pages show it only via `<img>`.

use axum::extract::{Path as UrlPath, State};
use axum::http::header::{CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::auth::{no_store, Admin};
use super::report_files::{self, FileKind, ReadError};
use super::reports::blocking;
use crate::state::AppState;

/// What an SVG may do when opened on its own: draw, with inline styles; nothing else.
const SVG_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; sandbox";

/// `GET /ui/reports/svg/{name}`: a plot, for `<img>`.
pub async fn svg_handler(
    _admin: Admin,
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    let plain = |status: StatusCode, text: &'static str| no_store((status, text).into_response());
    if report_files::kind_of(&name) != Some(FileKind::Svg) {
        return plain(StatusCode::BAD_REQUEST, "not a plot name");
    }
    let Some(dir) = state.console().reports_dir() else {
        return plain(StatusCode::NOT_FOUND, "no reports folder");
    };
    let read = blocking(dir, move |dir| {
        report_files::read(dir, &name, report_files::MAX_SVG_BYTES)
    })
    .await;
    let bytes = match read {
        Some(Ok(bytes)) => bytes,
        Some(Err(ReadError::TooLarge { .. })) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the plot is too large to show",
            )
        }
        Some(Err(_)) | None => return plain(StatusCode::NOT_FOUND, "no such plot"),
    };
    let mut response = no_store(bytes.into_response());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("image/svg+xml"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(SVG_CSP));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
