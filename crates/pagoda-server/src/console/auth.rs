//! Who may see the console: an `Admin` extractor that every page and action takes (401 with
//! the sign-in form without a session, 403 once the key is no longer an admin's), the
//! sign-in and sign-out handlers, and the CSRF and origin checks of write actions.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, State};
use axum::http::header::{CACHE_CONTROL, COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use pagoda_gateway::{Caller, KeyId, TenantId};

use super::html;
use super::session::{clear_cookie, cookie_value, same_token, set_cookie};
use crate::state::AppState;

/// A signed-in admin: the tenant, the key's id and the session's CSRF token.
pub struct Admin {
    pub tenant: TenantId,
    pub key_id: KeyId,
    pub csrf: String,
}

/// Why a console request is refused; the body never says more than that.
pub enum Denied {
    /// No live session (or no gateway): the sign-in form, 401.
    SignIn(Option<&'static str>),
    /// Signed in, but the key or tenant may no longer administer: 403.
    Forbidden,
    /// A write without the session's CSRF token or from another origin: 403.
    BadWrite,
}

impl IntoResponse for Denied {
    fn into_response(self) -> Response {
        let (status, body) = match self {
            Denied::SignIn(message) => (StatusCode::UNAUTHORIZED, html::sign_in(message)),
            Denied::Forbidden => (
                StatusCode::FORBIDDEN,
                html::sign_in(Some("That key is not an admin tenant's key.")),
            ),
            Denied::BadWrite => (
                StatusCode::FORBIDDEN,
                html::sign_in(Some(
                    "The form was stale or came from another site; try again.",
                )),
            ),
        };
        no_store((status, axum::response::Html(body)).into_response())
    }
}

/// Console pages hold tenants' data: never cached.
pub fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(CACHE_CONTROL, "no-store".parse().expect("a valid header"));
    response
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(cookie_value)
        .map(str::to_string)
}

/// Whether the key behind a session may still administer.
fn still_admin(state: &AppState, tenant: &TenantId, key_id: &KeyId) -> bool {
    let Some(gateway) = state.gateway() else {
        return false;
    };
    let live = matches!(gateway.keys().get(key_id), Ok(Some(k)) if k.is_usable(pagoda_gateway::clock::now_ms()) && &k.tenant == tenant);
    live && gateway.policy().tenant(tenant).admin
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = Denied;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Denied> {
        let console = state.console();
        let session = session_id(&parts.headers)
            .and_then(|id| console.sessions.get(&id))
            .ok_or(Denied::SignIn(None))?;
        if !still_admin(state, &session.tenant, &session.key_id) {
            return Err(Denied::Forbidden);
        }
        Ok(Admin {
            tenant: session.tenant,
            key_id: session.key_id,
            csrf: session.csrf,
        })
    }
}

impl Admin {
    /// A write action must carry the session's CSRF token, and a browser's `Origin`, when
    /// sent, must be this server.
    pub fn check_write(
        &self,
        headers: &HeaderMap,
        form: &HashMap<String, String>,
    ) -> Result<(), Denied> {
        let token_ok = form
            .get("csrf")
            .is_some_and(|token| same_token(token, &self.csrf));
        if !token_ok || !same_origin(headers) {
            return Err(Denied::BadWrite);
        }
        Ok(())
    }
}

fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true; // Not a browser's cross-site form post: those always send Origin.
    };
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, rest)| rest);
    matches!((origin_host, host), (Some(o), Some(h)) if o == h)
}

pub fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(LOCATION, to.to_string())]).into_response()
}

/// `POST /ui/login` with `key`: an admin tenant's live key opens a session.
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let Some(gateway) = state.gateway() else {
        return Denied::SignIn(Some("The console needs the gateway (--gateway-db)."))
            .into_response();
    };
    if !same_origin(&headers) {
        return Denied::BadWrite.into_response();
    }
    let key = form.get("key").map(|k| k.trim()).unwrap_or("");
    let caller: Caller = match gateway.authenticate(Some(&format!("Bearer {key}"))) {
        Ok(caller) => caller,
        Err(_) => return Denied::SignIn(Some("That key is not valid.")).into_response(),
    };
    if gateway.authorize_usage(&caller).is_err() {
        return Denied::Forbidden.into_response();
    }
    let id = state
        .console()
        .sessions
        .open(caller.tenant.clone(), caller.key_id.clone());
    if let Err(e) = gateway.keys().record_action(
        caller.tenant.as_str(),
        caller.key_id.as_str(),
        "console.sign_in",
        "",
    ) {
        tracing::error!(error = %e, "cannot record a console sign-in; refusing it");
        state.console().sessions.close(&id);
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the admin log cannot be written",
        )
            .into_response();
    }
    let mut response = redirect("/ui/engine");
    response
        .headers_mut()
        .insert(SET_COOKIE, set_cookie(&id).parse().expect("a valid cookie"));
    no_store(response)
}

/// `POST /ui/logout`: ends the session.
pub async fn logout(
    State(state): State<AppState>,
    admin: Admin,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Result<Response, Denied> {
    admin.check_write(&headers, &form)?;
    if let Some(id) = session_id(&headers) {
        state.console().sessions.close(&id);
    }
    let mut response = redirect("/ui");
    response
        .headers_mut()
        .insert(SET_COOKIE, clear_cookie().parse().expect("a valid cookie"));
    Ok(response)
}
