//! Tenants and keys: each tenant's policy and spend against its budget, every key with its
//! state, and the write actions (create a key, its secret shown once; revoke one), each
//! recorded in the gateway's admin log.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Form;
use pagoda_gateway::clock::{now_ms, Period};
use pagoda_gateway::{Gateway, KeyId, TenantId, TenantPolicy, UsageQuery};
use rust_decimal::Decimal;

use super::auth::{no_store, redirect, Admin, Denied};
use super::html::{escape, page, table, time};
use crate::state::AppState;

/// Longest expiry a key can be given here, in days.
const MAX_EXPIRY_DAYS: i64 = 3650;

/// Settled spend per tenant since `from_ms`.
async fn spend_since(gateway: &Gateway, from_ms: i64) -> BTreeMap<String, Decimal> {
    let query = UsageQuery {
        from_ms: Some(from_ms),
        ..UsageQuery::default()
    };
    match gateway.usage(&query).await {
        Ok(rows) => rows.into_iter().map(|r| (r.tenant, r.cost)).collect(),
        Err(e) => {
            tracing::warn!(error = %e, "the console cannot read spend from the metering store");
            BTreeMap::new()
        }
    }
}

fn limit(value: Option<u64>) -> String {
    value.map_or("-".into(), |v| v.to_string())
}

/// Spent against a budget, as text and a bar.
fn budget_cell(spent: Decimal, budget: Option<Decimal>, currency: &str) -> String {
    let spent = spent.normalize();
    match budget.filter(|b| *b > Decimal::ZERO) {
        None => format!(
            "{spent} {} <span class=\"muted\">(no budget)</span>",
            escape(currency)
        ),
        Some(b) => {
            let pct = (spent / b * Decimal::ONE_HUNDRED).round_dp(1);
            let width = pct.min(Decimal::ONE_HUNDRED);
            let over = if pct >= Decimal::ONE_HUNDRED {
                " class=\"over\""
            } else {
                ""
            };
            format!(
                "<span class=\"bar\"><span{over} style=\"width:{width}%\"></span></span>{spent} / {} {} ({pct}%)",
                b.normalize(),
                escape(currency)
            )
        }
    }
}

fn policy_row(
    name: &str,
    p: &TenantPolicy,
    day: Decimal,
    month: Decimal,
    currency: &str,
) -> Vec<String> {
    let budget = p.budget.as_ref();
    vec![
        escape(name),
        if p.admin { "yes".into() } else { "".into() },
        format!("{} / {}", p.priority, escape(&p.slo_class)),
        limit(p.requests_per_minute),
        limit(p.tokens_per_minute),
        limit(p.max_concurrent),
        escape(p.cache_group.as_deref().unwrap_or("-")),
        budget_cell(day, budget.and_then(|b| b.daily), currency),
        budget_cell(month, budget.and_then(|b| b.monthly), currency),
    ]
}

fn key_state(expires: Option<i64>, revoked: Option<i64>, now: i64) -> &'static str {
    if revoked.is_some() {
        "revoked"
    } else if expires.is_some_and(|e| e <= now) {
        "expired"
    } else {
        "active"
    }
}

/// The page, with `notice` (HTML) above it: a created key's secret, or an error.
async fn render(state: &AppState, admin: &Admin, notice: &str) -> Result<String, String> {
    let gateway = state.gateway().ok_or("no gateway")?;
    let policy = gateway.policy();
    let now = now_ms();
    let day = spend_since(gateway, Period::Day.start_ms(now)).await;
    let month = spend_since(gateway, Period::Month.start_ms(now)).await;
    let keys = gateway.keys().list().map_err(|e| e.to_string())?;

    let mut names: BTreeSet<String> = policy
        .named_tenants()
        .map(|(t, _)| t.as_str().to_string())
        .collect();
    names.extend(keys.iter().map(|k| k.tenant.as_str().to_string()));
    names.extend(month.keys().cloned());
    let zero = Decimal::ZERO;
    let tenant_rows: Vec<Vec<String>> = names
        .iter()
        .map(|name| {
            let p = policy.tenant(&TenantId::new(name.clone()));
            let spent = |m: &BTreeMap<String, Decimal>| *m.get(name).unwrap_or(&zero);
            policy_row(name, p, spent(&day), spent(&month), &policy.currency)
        })
        .collect();

    let key_rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let state = key_state(k.expires_ms, k.revoked_ms, now);
            let action = if state == "active" {
                format!(
                    "<form class=\"inline\" method=\"post\" action=\"/ui/keys/{id}/revoke\">\
                     <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
                     <button class=\"danger\" type=\"submit\" data-revoke=\"{id}\">Revoke</button></form>",
                    id = escape(k.key_id.as_str()),
                    csrf = admin.csrf
                )
            } else {
                String::new()
            };
            vec![
                format!("<code>{}</code>", escape(k.key_id.as_str())),
                escape(k.tenant.as_str()),
                escape(k.name.as_deref().unwrap_or("-")),
                time(Some(k.created_ms)),
                time(k.expires_ms),
                time(k.last_used_ms),
                format!("<span class=\"state-{state}\">{state}</span>"),
                action,
            ]
        })
        .collect();

    let actions = gateway
        .keys()
        .recent_actions(50)
        .map_err(|e| e.to_string())?;
    let action_rows: Vec<Vec<String>> = actions
        .iter()
        .map(|a| {
            vec![
                time(Some(a.ts_ms)),
                escape(&a.actor_tenant),
                format!("<code>{}</code>", escape(&a.actor_key)),
                escape(&a.action),
                escape(&a.target),
            ]
        })
        .collect();

    let options: String = names
        .iter()
        .map(|n| format!("<option value=\"{}\">", escape(n)))
        .collect();
    let form = format!(
        "<form class=\"create\" method=\"post\" action=\"/ui/keys\" id=\"create-key\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>Tenant<input name=\"tenant\" list=\"tenant-names\" required maxlength=\"128\"></label>\
         <datalist id=\"tenant-names\">{options}</datalist>\
         <label>Name<input name=\"name\" maxlength=\"128\"></label>\
         <label>Expires in days<input name=\"expires_days\" type=\"number\" min=\"1\" max=\"{MAX_EXPIRY_DAYS}\"></label>\
         <button type=\"submit\">Create key</button></form>",
        admin.csrf
    );
    Ok(format!(
        "{notice}<h2>Tenants</h2>{}<h2>Keys</h2>{form}{}<h2>Recent admin actions</h2>{}",
        table(
            "tenants",
            &[
                "tenant",
                "admin",
                "priority / SLO class",
                "req/min",
                "tokens/min",
                "concurrent",
                "cache group",
                "today",
                "this month"
            ],
            &tenant_rows
        ),
        table(
            "keys",
            &[
                "key id",
                "tenant",
                "name",
                "created (UTC)",
                "expires (UTC)",
                "last used (UTC)",
                "state",
                ""
            ],
            &key_rows
        ),
        table(
            "admin-actions",
            &["time (UTC)", "by tenant", "by key", "action", "target"],
            &action_rows
        ),
    ))
}

async fn respond(state: &AppState, admin: &Admin, status: StatusCode, notice: &str) -> Response {
    match render(state, admin, notice).await {
        Ok(body) => no_store(
            (
                status,
                Html(page(
                    "Tenants and keys",
                    "/ui/tenants",
                    admin.tenant.as_str(),
                    &admin.csrf,
                    &body,
                )),
            )
                .into_response(),
        ),
        Err(e) => {
            tracing::error!(error = %e, "the console's tenants page failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the gateway database cannot be read",
            )
                .into_response()
        }
    }
}

pub async fn page_handler(State(state): State<AppState>, admin: Admin) -> Response {
    respond(&state, &admin, StatusCode::OK, "").await
}

fn error_notice(message: &str) -> String {
    format!(
        "<p class=\"error\" id=\"form-error\">{}</p>",
        escape(message)
    )
}

/// `POST /ui/keys`: `tenant`, optional `name` and `expires_days`.
pub async fn create_key(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Result<Response, Denied> {
    admin.check_write(&headers, &form)?;
    let Some(gateway) = state.gateway() else {
        return Err(Denied::Forbidden);
    };
    let tenant = form.get("tenant").map(|t| t.trim()).unwrap_or("");
    let name = form.get("name").map(|n| n.trim()).filter(|n| !n.is_empty());
    let bad = |m: &str| error_notice(m);
    if tenant.is_empty() || tenant.len() > 128 || tenant.chars().any(char::is_control) {
        return Ok(respond(
            &state,
            &admin,
            StatusCode::BAD_REQUEST,
            &bad("The tenant name must be 1 to 128 printable characters."),
        )
        .await);
    }
    if name.is_some_and(|n| n.len() > 128 || n.chars().any(char::is_control)) {
        return Ok(respond(
            &state,
            &admin,
            StatusCode::BAD_REQUEST,
            &bad("The key name must be at most 128 printable characters."),
        )
        .await);
    }
    let expires_ms = match form
        .get("expires_days")
        .map(|d| d.trim())
        .filter(|d| !d.is_empty())
    {
        None => None,
        Some(days) => match days.parse::<i64>() {
            Ok(d) if (1..=MAX_EXPIRY_DAYS).contains(&d) => Some(now_ms() + d * 86_400_000),
            _ => {
                let m =
                    format!("Expiry must be a whole number of days from 1 to {MAX_EXPIRY_DAYS}.");
                return Ok(respond(&state, &admin, StatusCode::BAD_REQUEST, &bad(&m)).await);
            }
        },
    };
    let tenant_id = TenantId::new(tenant);
    let created = gateway.keys().create(&tenant_id, name, expires_ms);
    let (record, key) = match created {
        Ok(created) => created,
        Err(e) => {
            return Ok(respond(
                &state,
                &admin,
                StatusCode::BAD_REQUEST,
                &bad(&e.to_string()),
            )
            .await)
        }
    };
    let target = format!("key {} of tenant {}", record.key_id, record.tenant);
    if let Err(e) = gateway.keys().record_action(
        admin.tenant.as_str(),
        admin.key_id.as_str(),
        "key.create",
        &target,
    ) {
        // An unrecorded key must not stay usable.
        let _ = gateway.keys().revoke(&record.key_id);
        tracing::error!(error = %e, "cannot record a key creation; the key was revoked");
        return Ok(respond(
            &state,
            &admin,
            StatusCode::INTERNAL_SERVER_ERROR,
            &bad("The admin log cannot be written; no key was created."),
        )
        .await);
    }
    let notice = format!(
        "<div class=\"card\" id=\"new-key\"><p class=\"ok\">Created key <code>{}</code> for tenant <b>{}</b>. \
         Copy it now: it is shown only this once.</p><code class=\"secret\" id=\"new-key-secret\">{}</code></div>",
        escape(record.key_id.as_str()),
        escape(record.tenant.as_str()),
        escape(key.reveal())
    );
    Ok(respond(&state, &admin, StatusCode::OK, &notice).await)
}

/// `POST /ui/keys/{id}/revoke`.
pub async fn revoke_key(
    State(state): State<AppState>,
    admin: Admin,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Result<Response, Denied> {
    admin.check_write(&headers, &form)?;
    let Some(gateway) = state.gateway() else {
        return Err(Denied::Forbidden);
    };
    let key_id = KeyId::new(id);
    let Ok(Some(record)) = gateway.keys().get(&key_id) else {
        return Ok(respond(
            &state,
            &admin,
            StatusCode::NOT_FOUND,
            &error_notice("No such key."),
        )
        .await);
    };
    let target = format!("key {} of tenant {}", record.key_id, record.tenant);
    if let Err(e) = gateway.keys().record_action(
        admin.tenant.as_str(),
        admin.key_id.as_str(),
        "key.revoke",
        &target,
    ) {
        tracing::error!(error = %e, "cannot record a key revocation; not revoking");
        return Ok(respond(
            &state,
            &admin,
            StatusCode::INTERNAL_SERVER_ERROR,
            &error_notice("The admin log cannot be written; the key was not revoked."),
        )
        .await);
    }
    if let Err(e) = gateway.keys().revoke(&key_id) {
        return Ok(respond(
            &state,
            &admin,
            StatusCode::INTERNAL_SERVER_ERROR,
            &error_notice(&e.to_string()),
        )
        .await);
    }
    Ok(redirect("/ui/tenants"))
}
