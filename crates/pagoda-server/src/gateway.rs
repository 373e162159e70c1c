//! The server's side of the gateway, called at a few fixed points: the `authenticate`
//! middleware (puts a `Caller` in the request's extensions), `precheck` before any costly
//! work on a request, `admit` once the prompts are tokenized, and `observe` in
//! `generate::Tracked` for every engine output. With no gateway configured each of them
//! lets everything through.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use pagoda_engine::{CacheSalt, TenantKey};
use pagoda_gateway::{
    clock, Admitted, ChoiceEnd, Gateway, GatewayConfig, GatewayError, PlannedPrompt, RequestId,
    Ticket, UsageQuery,
};
use pagoda_runtime::{GenerateRequest, RequestOutput};
use serde_json::json;

use crate::error::{ApiError, ServerError};
use crate::state::AppState;

/// The authenticated caller of a request: `req.extensions().get::<Caller>()` in a handler or
/// middleware after `authenticate`, or an `Option<Extension<Caller>>` extractor.
pub use pagoda_gateway::Caller;

/// Opens the gateway before the server takes requests.
pub async fn start(state: &AppState, config: Option<GatewayConfig>) -> Result<(), ServerError> {
    let Some(config) = config else {
        return Ok(());
    };
    let gateway = Gateway::open(config).await?;
    let keys = gateway.keys().count()?;
    if keys == 0 {
        tracing::warn!("the gateway has no API keys yet; create one with `pagoda keys create`");
    }
    // Requests are priced and allowed by the served model, whatever alias they name.
    let model = state.model_name();
    if !gateway.policy().is_priced(model) {
        if gateway.policy().has_budgets() {
            return Err(GatewayError::Unpriced {
                model: model.to_string(),
            }
            .into());
        }
        tracing::warn!(%model, "no price for this model in the gateway policy; its requests cost 0");
    }
    tracing::info!(keys, "gateway on: requests need an API key");
    state.set_gateway(gateway);
    Ok(())
}

/// Writes the cost events still queued (those of aborted requests) before exit.
pub async fn stop(state: &AppState) {
    if let Some(gateway) = state.gateway() {
        gateway.flush().await;
    }
}

/// Routes that stay open with a gateway: probes and scrapes carry no keys.
fn is_open(path: &str) -> bool {
    matches!(path, "/health" | "/metrics" | "/version") || is_console(path)
}

/// The console signs its admins in with a session of its own (`console/auth.rs`).
fn is_console(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

/// Middleware: 401 unless the request carries a live key; the caller rides along in the
/// request's extensions.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let Some(gateway) = state.gateway() else {
        return next.run(req).await;
    };
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    if is_open(req.uri().path()) {
        // Open without a key; with a good one the caller rides along (an admin's scrape of
        // /metrics also gets the per-tenant series).
        if let Some(caller) = header.and_then(|h| gateway.authenticate(Some(h)).ok()) {
            req.extensions_mut().insert(caller);
        }
        return next.run(req).await;
    }
    match gateway.authenticate(header) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The checks that need no token count (the key's model, the request's sequences against
/// its concurrency limit, a tenant already out of rate or budget), before the server spends
/// CPU on guard scans, template rendering and tokenization. Runs on the blocking pool.
pub fn precheck(
    state: &AppState,
    caller: Option<&Caller>,
    sequences: usize,
) -> Result<(), ApiError> {
    let (Some(gateway), Some(caller)) = (state.gateway(), caller) else {
        return Ok(());
    };
    // Whatever alias the client named: one model is served, priced and allowed by its name.
    let model = state.model_name();
    let shape = [PlannedPrompt {
        prompt_tokens: 0,
        max_tokens: 0,
        n: sequences,
    }];
    Ok(gateway.precheck(caller, model, &shape)?)
}

/// What admission decided: the meter, and the tenant's latency class (`None`: no gateway).
pub struct Admission {
    pub ticket: Option<Arc<Ticket>>,
    pub tenant_slo_class: Option<String>,
}

/// Applies the tenant's policy to the requests (max_tokens cap, priority, cache salt, whose
/// queue share they take) and reserves their worst case; the cost event will carry
/// `response_id`. Without a gateway only the client's own cache salt applies.
pub async fn admit(
    state: &AppState,
    caller: Option<&Caller>,
    response_id: &str,
    requests: &mut [GenerateRequest],
    client_salt: Option<&str>,
) -> Result<Admission, ApiError> {
    let (Some(gateway), Some(caller)) = (state.gateway(), caller) else {
        for request in requests.iter_mut() {
            request.cache_salt = cache_salt(None, client_salt);
        }
        return Ok(Admission {
            ticket: None,
            tenant_slo_class: None,
        });
    };
    let model = state.model_name();
    let mut plan: Vec<PlannedPrompt> = requests
        .iter()
        .map(|r| PlannedPrompt {
            prompt_tokens: r.prompt_token_ids.len(),
            max_tokens: r.sampling.max_tokens.unwrap_or(0),
            n: r.sampling.n.max(1),
        })
        .collect();
    let admitted = gateway
        .admit_as(RequestId::new(response_id), caller, model, &mut plan)
        .await?;
    let tenant = TenantKey::new(caller.tenant.as_str());
    let salt = cache_salt(Some(&admitted), client_salt);
    for (request, planned) in requests.iter_mut().zip(&plan) {
        request.sampling.max_tokens = Some(planned.max_tokens);
        request.sampling.min_tokens = request.sampling.min_tokens.min(planned.max_tokens);
        request.priority = admitted.priority(Some(request.priority));
        request.cache_salt = salt.clone();
        request.tenant = Some(tenant.clone());
    }
    Ok(Admission {
        ticket: Some(admitted.ticket),
        tenant_slo_class: Some(admitted.slo_class),
    })
}

/// The one place a request's prefix-cache salt is made: the tenant's (or its sharing
/// group's) salt combined with the client's, or the client's alone on an open server.
fn cache_salt(admitted: Option<&Admitted>, client: Option<&str>) -> Option<CacheSalt> {
    match admitted {
        Some(a) => Some(CacheSalt::new(a.cache_salt(client))),
        None => client.map(CacheSalt::new),
    }
}

/// Meters one engine output. When it finishes the request's last choice, the cost event is
/// committed before this returns, so the response's last bytes leave after it is durable.
pub async fn observe(ticket: Option<&Ticket>, prompt_index: usize, out: &RequestOutput) {
    let Some(ticket) = ticket else { return };
    ticket.on_tokens(
        prompt_index,
        out.index,
        out.token_ids.len(),
        out.cached_tokens,
    );
    let Some(done) = &out.finished else { return };
    let end = ChoiceEnd {
        prompt_tokens: done.usage.prompt_tokens,
        cached_tokens: done.usage.cached_tokens,
        completion_tokens: done.usage.completion_tokens,
        queued: done.timings.queued,
        first_token: done.timings.first_token,
        compute: done.timings.compute,
        finish_reason: done.finish_reason.as_str(),
        failed: done.error.is_some(),
    };
    if ticket.on_finished(prompt_index, out.index, end) {
        ticket.commit().await;
    }
}

/// Per-tenant counters for `/metrics`, for admin callers only: tenants' names, tokens and
/// spend are not for an unauthenticated scrape.
pub fn render_metrics(state: &AppState, caller: Option<&Caller>, out: &mut String) {
    let Some(gateway) = state.gateway() else {
        return;
    };
    if caller.is_some_and(|c| gateway.authorize_usage(c).is_ok()) {
        gateway.render_metrics(out);
    }
}

/// `GET /v1/usage?tenant=&from=&to=&group_by=model,hour`, for admin keys.
pub async fn usage(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let (Some(gateway), Some(Extension(caller))) = (state.gateway(), caller) else {
        return Err(ApiError::RouteNotFound("/v1/usage".into()));
    };
    gateway.authorize_usage(&caller)?;
    let mut query = UsageQuery {
        tenant: params.get("tenant").filter(|t| !t.is_empty()).cloned(),
        ..UsageQuery::default()
    };
    let time = |name: &str| -> Result<Option<i64>, ApiError> {
        match params.get(name).filter(|v| !v.is_empty()) {
            Some(v) => clock::parse_time(v)
                .map(Some)
                .map_err(|e| ApiError::invalid(name, e.to_string())),
            None => Ok(None),
        }
    };
    query.from_ms = time("from")?;
    query.to_ms = time("to")?;
    if let Some(group_by) = params.get("group_by") {
        query
            .set_group_by(group_by)
            .map_err(|e| ApiError::invalid("group_by", e.to_string()))?;
    }
    let rows = gateway.usage(&query).await?;
    Ok(Json(json!({
        "object": "list",
        "currency": gateway.policy().currency,
        "data": rows,
    }))
    .into_response())
}
