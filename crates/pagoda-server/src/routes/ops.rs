//! `GET /health`, `GET /metrics`, `GET /version`, and the 404 for unknown routes.

use axum::extract::State;
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use crate::error::ApiError;
use crate::gateway::Caller;
use crate::state::AppState;

/// 200 once the model is loaded and the engine loop is alive; 503 while loading, draining,
/// or after the engine stopped.
pub async fn health(State(state): State<AppState>) -> Response {
    if state.is_healthy() {
        (StatusCode::OK, Json(json!({"status": "ok"}))).into_response()
    } else {
        let reason = if state.is_draining() {
            "draining"
        } else if state.loaded().is_none() {
            "loading"
        } else {
            "engine stopped"
        };
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": reason})),
        )
            .into_response()
    }
}

pub async fn metrics(State(state): State<AppState>, caller: Option<Extension<Caller>>) -> Response {
    let stats = state.loaded().map(|l| l.engine.stats());
    let block_size = state.loaded().map(|l| l.engine.info().kv_cache.block_size);
    let mut text = state
        .metrics()
        .render(state.model_name(), stats.as_ref(), block_size);
    if let Some(guard) = state.guard() {
        guard.render_metrics(&mut text);
    }
    if let Some(kv_events) = state.kv_events() {
        kv_events.render(&mut text);
    }
    let caller = caller.map(|Extension(c)| c);
    crate::gateway::render_metrics(&state, caller.as_ref(), &mut text);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

pub async fn version() -> Json<serde_json::Value> {
    Json(json!({"version": env!("CARGO_PKG_VERSION")}))
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::RouteNotFound(uri.path().to_string())
}
