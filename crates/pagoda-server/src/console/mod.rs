//! The operator console at `/ui`: server-rendered pages for admins of the gateway (live
//! engine, tenants and keys, usage and cost, guardrails, saved reports). Every asset is
//! served from the binary; nothing is fetched from anywhere else. The pages read the same
//! stores the CLI and `/v1/usage` do, and the report files `--console-reports-dir` names.

mod auth;
mod engine;
mod guard_page;
mod history;
mod html;
mod report_bench;
mod report_files;
mod report_kinds;
mod report_plan;
mod report_redteam;
mod report_svg;
mod reports;
mod session;
mod tenants;
mod usage;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;
use auth::Admin;
use history::{History, Sample};
use session::Sessions;

/// The console's own state: sign-ins, the engine's sampled history, the reports folder.
#[derive(Default)]
pub struct Console {
    sessions: Sessions,
    history: Mutex<History>,
    reports_dir: OnceLock<PathBuf>,
}

impl Console {
    /// Later calls are ignored.
    pub fn set_reports_dir(&self, dir: PathBuf) {
        let _ = self.reports_dir.set(dir);
    }

    fn reports_dir(&self) -> Option<PathBuf> {
        self.reports_dir.get().cloned()
    }

    fn history_samples(&self) -> Vec<Sample> {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .samples()
    }
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(home))
        .route("/ui/", get(home))
        .route("/ui/login", post(auth::login))
        .route("/ui/logout", post(auth::logout))
        .route("/ui/engine", get(engine::page_handler))
        .route("/ui/api/engine", get(engine::history))
        .route("/ui/tenants", get(tenants::page_handler))
        .route("/ui/keys", post(tenants::create_key))
        .route("/ui/keys/{id}/revoke", post(tenants::revoke_key))
        .route("/ui/usage", get(usage::page_handler))
        .route("/ui/usage.csv", get(usage::csv))
        .route("/ui/guard", get(guard_page::page_handler))
        .route("/ui/reports", get(reports::list_handler))
        .route("/ui/reports/{name}", get(reports::view_handler))
        .route("/ui/reports/svg/{name}", get(report_svg::svg_handler))
        .route("/ui/console.js", get(script))
        .route("/ui/{*rest}", get(not_found))
}

/// `/ui`: the engine page for a signed-in admin, the sign-in form (401) for anyone else.
async fn home(_admin: Admin) -> Response {
    auth::redirect("/ui/engine")
}

async fn not_found(_admin: Admin) -> Response {
    (axum::http::StatusCode::NOT_FOUND, "no such console page").into_response()
}

async fn script(_admin: Admin) -> Response {
    (
        [(CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("console.js"),
    )
        .into_response()
}

/// Samples the engine every `history::EVERY` for the live charts, while the server runs.
pub fn spawn_sampler(state: AppState) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(history::EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            let Some(loaded) = state.loaded() else {
                continue;
            };
            let stats = loaded.engine.stats();
            let buckets = state.metrics().latency_buckets();
            let now = pagoda_gateway::clock::now_ms();
            state
                .console()
                .history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(now, stats, buckets);
        }
    });
}
