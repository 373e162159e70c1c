//! The live engine page: charts of the sampled history (drawn and refreshed every few
//! seconds by console.js from `/ui/api/engine`), with the numbers of the latest sample.

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::auth::{no_store, Admin};
use super::html::{escape, page};
use crate::state::AppState;

/// Chart id, title, unit, and the sample fields it draws.
const CHARTS: [(&str, &str, &str, &[&str]); 6] = [
    (
        "requests",
        "Requests running / waiting",
        "",
        &["running", "waiting"],
    ),
    ("kv", "KV-cache usage", "%", &["kv_usage"]),
    ("prefix", "Prefix-cache hit rate", "%", &["prefix_hit_rate"]),
    (
        "tokens",
        "Tokens per second (output / prompt)",
        "/s",
        &["output_tokens_per_s", "prompt_tokens_per_s"],
    ),
    (
        "ttft",
        "Time to first token p50 / p99 (30 s)",
        "s",
        &["ttft_p50_s", "ttft_p99_s"],
    ),
    (
        "itl",
        "Inter-token latency p50 / p99 (30 s)",
        "s",
        &["itl_p50_s", "itl_p99_s"],
    ),
];

pub async fn page_handler(State(state): State<AppState>, admin: Admin) -> Response {
    let mut cards = String::new();
    for (id, title, unit, series) in CHARTS {
        cards.push_str(&format!(
            "<div class=\"card chart\" id=\"chart-{id}\" data-series=\"{}\" data-unit=\"{unit}\">\
             <h3>{}</h3><svg viewBox=\"0 0 300 120\" preserveAspectRatio=\"none\" role=\"img\" \
             aria-label=\"{}\"></svg><div class=\"value\">waiting for samples</div></div>",
            series.join(","),
            escape(title),
            escape(title),
        ));
    }
    let info = match state.loaded() {
        Some(loaded) => {
            let kv = &loaded.engine.info().kv_cache;
            format!(
                "<p class=\"muted\">Model <b>{}</b>; {} KV blocks of {} tokens. Preemptions in the \
                 last sample: <span id=\"preemptions\">-</span>. Updated <span id=\"updated\">never</span>.</p>",
                escape(state.model_name()),
                kv.num_blocks,
                kv.block_size
            )
        }
        None => "<p class=\"muted\">The model is still loading.</p>".into(),
    };
    let body = format!("{info}<div class=\"grid\" id=\"engine-charts\">{cards}</div>");
    no_store(
        Html(page(
            "Engine",
            "/ui/engine",
            admin.tenant.as_str(),
            &admin.csrf,
            &body,
        ))
        .into_response(),
    )
}

/// `GET /ui/api/engine`: the sampled history, oldest first.
pub async fn history(State(state): State<AppState>, _admin: Admin) -> Response {
    let samples = state.console().history_samples();
    no_store(
        Json(json!({ "every_ms": super::history::EVERY.as_millis() as u64, "samples": samples }))
            .into_response(),
    )
}
