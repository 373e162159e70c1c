//! Guardrails: the latest audit decisions (entity types, rule ids and counts; the log never
//! holds values), blocks per tenant and reason over them, whether the log's hash chain
//! verifies, and the newest red-team report saved in the reports folder.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use pagoda_guard::audit::AuditRecord;
use pagoda_guard::{verify_with, AuditKey};

use super::auth::{no_store, Admin};
use super::html::{escape, page, table, time};
use crate::state::AppState;

/// Records shown; read from the end of the log, at most `TAIL_BYTES` of it.
const SHOWN: usize = 200;
const TAIL_BYTES: u64 = 4 << 20;

/// The last `SHOWN` records, newest first.
fn tail(path: &Path) -> std::io::Result<Vec<AuditRecord>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut text = String::new();
    file.take(TAIL_BYTES).read_to_string(&mut text)?;
    let mut lines: Vec<&str> = text.lines().collect();
    if start > 0 && !lines.is_empty() {
        lines.remove(0); // Cut mid-line.
    }
    Ok(lines
        .iter()
        .rev()
        .take(SHOWN)
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// What a blocked request was blocked for: entity types, rules, refused tools.
fn reasons(r: &AuditRecord) -> Vec<String> {
    let e = &r.event;
    let mut out: Vec<String> = e.entities.keys().map(|k| k.name().to_string()).collect();
    out.extend(e.rules.iter().map(|rule| rule.0.clone()));
    out.extend(e.tool_calls_refused.iter().map(|t| format!("tool:{t}")));
    if out.is_empty() {
        out.push("other".into());
    }
    out
}

fn verification(path: &Path, key: Option<&AuditKey>) -> String {
    match verify_with(path, key, &[]) {
        Ok(v) => format!(
            "<p class=\"ok\" id=\"chain\">Hash chain verified: {} records{}.</p>",
            v.records,
            if key.is_some() { ", keyed" } else { "" }
        ),
        Err(e) => format!(
            "<p class=\"error\" id=\"chain\">Hash chain does not verify: {}</p>",
            escape(&e.to_string())
        ),
    }
}

pub async fn page_handler(State(state): State<AppState>, admin: Admin) -> Response {
    // Red-team results matter with guardrails off too: they show what is let through.
    let redteam = super::reports::redteam_section(&state).await;
    let respond = |body: String| {
        no_store(
            Html(page(
                "Guardrails",
                "/ui/guard",
                admin.tenant.as_str(),
                &admin.csrf,
                &format!("{body}{redteam}"),
            ))
            .into_response(),
        )
    };
    let Some(guard) = state.guard() else {
        return respond("<p class=\"muted\">Guardrails are off (no --guard-config).</p>".into());
    };
    let Some((path, key)) = guard.audit_log() else {
        return respond(
            "<p class=\"muted\">Guardrails are on without an audit log (--audit-log).</p>".into(),
        );
    };
    // Reading and hashing the whole log is file work: off the I/O threads.
    let read =
        tokio::task::spawn_blocking(move || (tail(&path), verification(&path, key.as_ref()))).await;
    let (records, chain) = match read {
        Ok((Ok(records), chain)) => (records, chain),
        Ok((Err(e), _)) => {
            return respond(format!(
                "<p class=\"error\">The audit log cannot be read: {}</p>",
                escape(&e.to_string())
            ))
        }
        Err(_) => return respond("<p class=\"error\">Reading the audit log failed.</p>".into()),
    };
    let mut blocks: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in records
        .iter()
        .filter(|r| name_of(&r.event.decision) == "block")
    {
        let tenant = r.event.tenant.clone().unwrap_or_else(|| "-".into());
        for reason in reasons(r) {
            *blocks.entry((tenant.clone(), reason)).or_default() += 1;
        }
    }
    let block_rows: Vec<Vec<String>> = blocks
        .into_iter()
        .map(|((tenant, reason), n)| vec![escape(&tenant), escape(&reason), n.to_string()])
        .collect();
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let e = &r.event;
            let entities: Vec<String> = e
                .entities
                .iter()
                .map(|(k, n)| format!("{} x{n}", k.name()))
                .collect();
            let rules: Vec<&str> = e.rules.iter().map(|rule| rule.0.as_str()).collect();
            vec![
                r.seq.to_string(),
                time(i64::try_from(r.ts_ms).ok()),
                escape(e.tenant.as_deref().unwrap_or("-")),
                escape(&name_of(&e.stage)),
                format!("<b>{}</b>", escape(&name_of(&e.decision))),
                escape(&entities.join(", ")),
                escape(&rules.join(", ")),
                escape(&e.tool_calls_refused.join(", ")),
                if e.canary_leaked {
                    "canary".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    respond(format!(
        "{chain}<h2>Blocks by tenant and reason (last {SHOWN} records)</h2>{}<h2>Recent decisions</h2>{}",
        table("guard-blocks", &["tenant", "reason", "blocks"], &block_rows),
        table(
            "guard-decisions",
            &["seq", "time (UTC)", "tenant", "stage", "decision", "entities", "rules", "tools refused", "leak"],
            &rows
        )
    ))
}
