//! `/ui/reports`: the reports saved in `--console-reports-dir`, newest first; one report in
//! the console's tables with its plots (served by `report_svg`); and the newest red-team
//! report for the Guardrails page.

use std::path::{Path, PathBuf};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::auth::{no_store, Admin};
use super::html::{escape, page, table, time};
use super::report_files::{self, Entry, FileKind, Listing};
use super::report_kinds::{self, Saved};
use super::{report_bench, report_plan, report_redteam};
use crate::state::AppState;

fn respond(admin: &Admin, status: StatusCode, title: &str, body: &str) -> Response {
    let html = page(
        title,
        "/ui/reports",
        admin.tenant.as_str(),
        &admin.csrf,
        body,
    );
    no_store((status, Html(html)).into_response())
}

const NO_DIR: &str = "<p class=\"muted\" id=\"no-reports-dir\">No reports folder: start the \
    server with <code>--console-reports-dir DIR</code> and save reports there (<code>pagoda \
    bench serve --out-dir DIR</code>, <code>pagoda plan --out DIR/plan.json</code>, \
    <code>pagoda redteam --out DIR/redteam.json</code>).</p>";

/// Runs file work off the I/O threads; a panic there is a failed read, not a failed page.
pub async fn blocking<T: Send + 'static>(
    dir: PathBuf,
    work: impl FnOnce(&Path) -> T + Send + 'static,
) -> Option<T> {
    tokio::task::spawn_blocking(move || work(&dir)).await.ok()
}

/// A report read from the folder, or why it cannot be shown.
pub fn load(dir: &Path, name: &str) -> Result<Saved, String> {
    match report_files::read(dir, name, report_files::MAX_JSON_BYTES) {
        Ok(bytes) => report_kinds::parse(&bytes),
        Err(e) => Err(format!("cannot be read: {e}")),
    }
}

/// Plots `bench serve` and the goodput search write beside their JSON: a report saved as
/// `PREFIXbench.json` owns `PREFIXlatency_cdf.svg` and `PREFIXsweep.svg`, and
/// `PREFIXgoodput_search.json` owns `PREFIXgoodput_search.svg`.
pub fn plots_of(report: &str, listing: &Listing) -> Vec<String> {
    let candidates: Vec<String> = if let Some(prefix) = report.strip_suffix("bench.json") {
        vec![
            format!("{prefix}latency_cdf.svg"),
            format!("{prefix}sweep.svg"),
        ]
    } else if let Some(prefix) = report.strip_suffix("goodput_search.json") {
        vec![format!("{prefix}goodput_search.svg")]
    } else {
        Vec::new()
    };
    candidates
        .into_iter()
        .filter(|name| listing.has(name))
        .collect()
}

fn report_link(name: &str) -> String {
    // Names passed `kind_of`: URL-safe characters only, so they go into the path as they are.
    format!("<a href=\"/ui/reports/{0}\">{0}</a>", escape(name))
}

fn list_body(listing: &Listing, rows: Vec<Vec<String>>) -> String {
    let mut owner = std::collections::HashMap::new();
    for e in listing.of_kind(FileKind::Json) {
        for plot in plots_of(&e.name, listing) {
            owner.insert(plot, e.name.clone());
        }
    }
    let plots: Vec<Vec<String>> = listing
        .of_kind(FileKind::Svg)
        .map(|e| {
            vec![
                format!("<a href=\"/ui/reports/svg/{0}\">{0}</a>", escape(&e.name)),
                time(e.modified_ms),
                owner.get(&e.name).map_or("-".into(), |r| report_link(r)),
            ]
        })
        .collect();
    let mut note = String::new();
    if listing.refused > 0 {
        note.push_str(&format!(
            "<p class=\"muted\" id=\"refused\">{} file(s) not shown: links, folders, or names \
             other than letters, digits, <code>.</code>, <code>_</code> and <code>-</code>.</p>",
            listing.refused
        ));
    }
    if listing.older > 0 {
        note.push_str(&format!(
            "<p class=\"muted\">{} older file(s) not listed (the newest {} of each kind are).</p>",
            listing.older,
            report_files::MAX_LISTED
        ));
    }
    format!(
        "<h2>JSON reports</h2>{}<h2>Plots</h2>{}{note}",
        table(
            "reports",
            &["file", "kind", "modified (UTC)", "summary"],
            &rows
        ),
        table("plots", &["file", "modified (UTC)", "report"], &plots)
    )
}

fn list_row(dir: &Path, e: &Entry) -> Vec<String> {
    let (kind, summary) = match load(dir, &e.name) {
        Ok(saved) => (
            saved.label().to_string(),
            escape(&report_kinds::summary(&saved)),
        ),
        Err(reason) => (
            "<span class=\"error\">unreadable</span>".into(),
            format!("<span class=\"error\">{}</span>", escape(&reason)),
        ),
    };
    vec![report_link(&e.name), kind, time(e.modified_ms), summary]
}

/// `GET /ui/reports`.
pub async fn list_handler(admin: Admin, State(state): State<AppState>) -> Response {
    let Some(dir) = state.console().reports_dir() else {
        return respond(&admin, StatusCode::OK, "Reports", NO_DIR);
    };
    let read = blocking(dir, |dir| {
        report_files::list(dir).map(|listing| {
            let rows: Vec<Vec<String>> = listing
                .of_kind(FileKind::Json)
                .map(|e| list_row(dir, e))
                .collect();
            list_body(&listing, rows)
        })
    })
    .await;
    let body = match read {
        Some(Ok(body)) => body,
        Some(Err(e)) => format!(
            "<p class=\"error\">The reports folder cannot be read: {}</p>",
            escape(&e.to_string())
        ),
        None => "<p class=\"error\">Reading the reports folder failed.</p>".into(),
    };
    respond(&admin, StatusCode::OK, "Reports", &body)
}

fn rendered(saved: &Saved) -> String {
    match saved {
        Saved::Bench(r) => report_bench::bench(r),
        Saved::Profile(p) => report_bench::profile(p),
        Saved::Goodput(g) => report_bench::goodput(g),
        Saved::Plan(p) => report_plan::plan(p),
        Saved::Redteam(r) => report_redteam::redteam(r),
    }
}

fn view_body(dir: &Path, name: &str) -> Result<String, StatusCode> {
    let listing = report_files::list(dir).map_err(|_| StatusCode::NOT_FOUND)?;
    let entry = listing
        .of_kind(FileKind::Json)
        .find(|e| e.name == name)
        .ok_or(StatusCode::NOT_FOUND)?;
    let mut body = format!(
        "<p class=\"muted\">{} (modified {} UTC) &middot; <a href=\"/ui/reports\">all reports</a></p>",
        escape(name),
        time(entry.modified_ms)
    );
    match load(dir, name) {
        Ok(saved) => body.push_str(&rendered(&saved)),
        Err(reason) => body.push_str(&format!(
            "<p class=\"error\" id=\"report-error\">This file is unreadable: {}</p>",
            escape(&reason)
        )),
    }
    let plots = plots_of(name, &listing);
    if !plots.is_empty() {
        body.push_str("<h2>Plots</h2><div class=\"plots\">");
        for plot in plots {
            body.push_str(&format!(
                "<figure><img src=\"/ui/reports/svg/{0}\" alt=\"plot {0}\"><figcaption>{0}</figcaption></figure>",
                escape(&plot)
            ));
        }
        body.push_str("</div>");
    }
    Ok(body)
}

/// `GET /ui/reports/{name}`: one JSON report.
pub async fn view_handler(
    admin: Admin,
    State(state): State<AppState>,
    UrlPath(name): UrlPath<String>,
) -> Response {
    if report_files::kind_of(&name) != Some(FileKind::Json) {
        return respond(
            &admin,
            StatusCode::BAD_REQUEST,
            "Reports",
            "<p class=\"error\">Not a report name.</p>",
        );
    }
    let Some(dir) = state.console().reports_dir() else {
        return respond(&admin, StatusCode::NOT_FOUND, "Reports", NO_DIR);
    };
    let title = name.clone();
    match blocking(dir, move |dir| view_body(dir, &name)).await {
        Some(Ok(body)) => respond(&admin, StatusCode::OK, &title, &body),
        Some(Err(status)) => respond(
            &admin,
            status,
            "Reports",
            "<p class=\"error\">No such report.</p>",
        ),
        None => respond(
            &admin,
            StatusCode::NOT_FOUND,
            "Reports",
            "<p class=\"error\">Reading the report failed.</p>",
        ),
    }
}

/// The newest saved red-team report, with its file, for the Guardrails page.
pub fn latest_redteam(dir: &Path) -> Option<(Entry, pagoda_redteam::SavedReport)> {
    let listing = report_files::list(dir).ok()?;
    let newest = listing
        .of_kind(FileKind::Json)
        .find_map(|e| match load(dir, &e.name) {
            Ok(Saved::Redteam(r)) => Some((e.clone(), r)),
            _ => None,
        });
    newest
}

/// The Guardrails page's red-team section.
pub async fn redteam_section(state: &AppState) -> String {
    let Some(dir) = state.console().reports_dir() else {
        return String::new();
    };
    let found = blocking(dir, latest_redteam).await.flatten();
    let body = match found {
        Some((entry, saved)) => format!(
            "<p class=\"muted\">From {} (modified {} UTC).</p>{}",
            report_link(&entry.name),
            time(entry.modified_ms),
            report_redteam::redteam(&saved)
        ),
        None => "<p class=\"muted\" id=\"no-redteam\">No red-team report saved in the reports \
                 folder (<code>pagoda redteam --out DIR/redteam.json</code>).</p>"
            .into(),
    };
    format!("<h2 id=\"redteam\">Latest red-team report</h2>{body}")
}
