//! The operator console at /ui over HTTP: nothing without an admin session, sign-in only
//! with an admin tenant's live key, CSRF and origin checks on every write, a created key's
//! secret in exactly one response, writes recorded in the admin log, and the pages showing
//! what the stores hold. `console_in_a_real_browser` drives the same pages in headless
//! Chromium (tests/python/test_console_browser.py).

mod common;

use std::path::{Path, PathBuf};

use common::gateway::{GatewayServer, PRICES};
use common::{chat_body, run_python};
use pagoda_gateway::KeyId;
use pagoda_server::{start_guard, GuardSettings};
use reqwest::header::{COOKIE, ORIGIN, SET_COOKIE};
use reqwest::redirect::Policy;

const POLICY: &str = r#"
[tenants.acme]
budget = { daily = "100" }
[tenants.root]
admin = true
"#;

/// Every GET route of the console.
const PAGES: [&str; 9] = [
    "/ui",
    "/ui/engine",
    "/ui/api/engine",
    "/ui/tenants",
    "/ui/usage",
    "/ui/usage.csv",
    "/ui/guard",
    "/ui/console.js",
    "/ui/no-such-page",
];

struct Console {
    g: GatewayServer,
    client: reqwest::Client,
    acme: String,
    admin: String,
    _dir: tempfile::TempDir,
}

impl Console {
    async fn start() -> Console {
        let g = GatewayServer::start(&format!("{PRICES}\n{POLICY}")).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("guard.toml"),
            "[default.entities]\nCARD = \"block\"\n",
        )
        .unwrap();
        let settings = GuardSettings {
            policy: dir.path().join("guard.toml"),
            audit_log: Some(dir.path().join("audit.jsonl")),
            audit_key: None,
        };
        start_guard(&g.server.state, Some(&settings)).unwrap();
        let acme = g.key("acme");
        let admin = g.key("root");
        let client = reqwest::Client::builder()
            .redirect(Policy::none())
            .build()
            .unwrap();
        Console {
            g,
            client,
            acme,
            admin,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        self.g.server.url(path)
    }

    /// Signs in with `key`; the session cookie on success.
    async fn sign_in(&self, key: &str) -> (u16, Option<String>) {
        let r = self
            .client
            .post(self.url("/ui/login"))
            .form(&[("key", key)])
            .send()
            .await
            .unwrap();
        let cookie = r
            .headers()
            .get(SET_COOKIE)
            .map(|v| v.to_str().unwrap().to_string());
        (r.status().as_u16(), cookie)
    }

    async fn session(&self) -> Session {
        let (status, cookie) = self.sign_in(&self.admin).await;
        assert_eq!(status, 303);
        let cookie = cookie.unwrap();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        let pair = cookie.split(';').next().unwrap().to_string();
        let page = self.get(&pair, "/ui/tenants").await.1;
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string();
        Session { cookie: pair, csrf }
    }

    async fn get(&self, cookie: &str, path: &str) -> (u16, String) {
        let r = self
            .client
            .get(self.url(path))
            .header(COOKIE, cookie)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn post(&self, cookie: &str, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let r = self
            .client
            .post(self.url(path))
            .header(COOKIE, cookie)
            .form(form)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Tenant acme's cost as `/v1/usage` reports it, written as the console writes money.
    async fn acme_cost(&self) -> String {
        let usage = self
            .g
            .get(Some(&self.admin), "/v1/usage?tenant=acme")
            .await
            .json;
        let cost = usage["data"][0]["cost"].as_str().unwrap();
        cost.parse::<rust_decimal::Decimal>()
            .unwrap()
            .normalize()
            .to_string()
    }

    async fn api_status(&self, key: &str) -> u16 {
        self.g
            .post(Some(key), "/v1/chat/completions", chat_body("hello", 2))
            .await
            .status
    }
}

struct Session {
    cookie: String,
    csrf: String,
}

fn secret_in(page: &str) -> Option<String> {
    let start = page.find("id=\"new-key-secret\">")? + "id=\"new-key-secret\">".len();
    Some(page[start..].split('<').next()?.to_string())
}

#[tokio::test]
async fn without_an_admin_session_every_console_route_is_refused_and_reveals_nothing() {
    let c = Console::start().await;
    assert_eq!(c.api_status(&c.acme).await, 200);
    for path in PAGES {
        for cookie in ["", "pagoda_console=0123456789abcdef"] {
            let (status, body) = c.get(cookie, path).await;
            assert_eq!(status, 401, "{path}");
            assert!(
                !body.contains("acme") && !body.contains("root") && !body.contains("tiny-qwen2"),
                "{path}: {body}"
            );
        }
        // An API key in the Authorization header is not a console session.
        let r = c
            .client
            .get(c.url(path))
            .bearer_auth(&c.admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{path}");
    }
    for path in ["/ui/keys", "/ui/keys/abc/revoke", "/ui/logout"] {
        let (status, _) = c.post("", path, &[("tenant", "x")]).await;
        assert_eq!(status, 401, "{path}");
    }
    // Sign-in: a wrong key 401, a live key of a tenant that is no admin 403; no session.
    let (status, cookie) = c.sign_in("pgd_0000000000000000_nope").await;
    assert_eq!((status, cookie), (401, None));
    let (status, cookie) = c.sign_in(&c.acme).await;
    assert_eq!((status, cookie), (403, None));
}

#[tokio::test]
async fn admins_create_and_revoke_keys_with_csrf_and_every_write_is_recorded() {
    let c = Console::start().await;
    let s = c.session().await;
    for path in PAGES.iter().filter(|p| !p.ends_with("no-such-page")) {
        let (status, _) = c.get(&s.cookie, path).await;
        assert!(status == 200 || status == 303, "{path}: {status}");
    }
    let form = |csrf: &'static str| [("csrf", csrf), ("tenant", "newteam"), ("name", "ci")];
    // No token, a wrong one, or a post from another site: refused, nothing created.
    let before = c.g.gateway.keys().list().unwrap().len();
    for csrf in ["", "0000"] {
        let (status, body) = c.post(&s.cookie, "/ui/keys", &form(csrf)).await;
        assert_eq!(status, 403, "{body}");
    }
    let r = c
        .client
        .post(c.url("/ui/keys"))
        .header(COOKIE, &s.cookie)
        .header(ORIGIN, "http://evil.example")
        .form(&[("csrf", s.csrf.as_str()), ("tenant", "newteam")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(c.g.gateway.keys().list().unwrap().len(), before);

    // Bad input: a clear error on the page, nothing created.
    let csrf = s.csrf.as_str();
    for bad in [
        [("csrf", csrf), ("tenant", ""), ("expires_days", "")],
        [("csrf", csrf), ("tenant", "t"), ("expires_days", "0")],
        [
            ("csrf", csrf),
            ("tenant", "t"),
            ("expires_days", "99999999999999999999"),
        ],
    ] {
        let (status, body) = c.post(&s.cookie, "/ui/keys", &bad).await;
        assert_eq!(status, 400, "{bad:?}");
        assert!(body.contains("id=\"form-error\""), "{body}");
    }
    assert_eq!(c.g.gateway.keys().list().unwrap().len(), before);

    let origin = c.url("");
    let r = c
        .client
        .post(c.url("/ui/keys"))
        .header(COOKIE, &s.cookie)
        .header(ORIGIN, origin.trim_end_matches('/'))
        .form(&[
            ("csrf", csrf),
            ("tenant", "newteam"),
            ("name", "<b>ci</b>"),
            ("expires_days", "7"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["cache-control"], "no-store");
    let page = r.text().await.unwrap();
    let secret = secret_in(&page).expect("the new key's secret");
    assert!(!page.contains("<b>ci</b>"), "names are escaped");
    assert_eq!(c.api_status(&secret).await, 200);
    // Shown once: no later page has it.
    for path in PAGES {
        assert!(!c.get(&s.cookie, path).await.1.contains(&secret), "{path}");
    }
    let key_id = secret.split('_').nth(1).unwrap().to_string();
    let (status, _) = c
        .post(
            &s.cookie,
            &format!("/ui/keys/{key_id}/revoke"),
            &[("csrf", "bad")],
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(c.api_status(&secret).await, 200);
    let (status, _) = c
        .post(
            &s.cookie,
            &format!("/ui/keys/{key_id}/revoke"),
            &[("csrf", csrf)],
        )
        .await;
    assert_eq!(status, 303);
    assert_eq!(c.api_status(&secret).await, 401);

    let actions = c.g.gateway.keys().recent_actions(10).unwrap();
    let summary: Vec<(String, String)> = actions
        .iter()
        .map(|a| (a.actor_tenant.clone(), a.action.clone()))
        .collect();
    let root = |a: &str| ("root".to_string(), a.to_string());
    assert_eq!(
        summary,
        [
            root("key.revoke"),
            root("key.create"),
            root("console.sign_in")
        ]
    );
    assert!(actions[0].target.contains(&key_id));
    assert!(actions.iter().all(|a| !format!("{a:?}").contains(&secret)));
    let tenants = c.get(&s.cookie, "/ui/tenants").await.1;
    assert!(tenants.contains("key.revoke") && tenants.contains(&key_id));

    // Revoking the admin's own key ends its session.
    let admin_id = c.admin.split('_').nth(1).unwrap();
    c.g.gateway.keys().revoke(&KeyId::new(admin_id)).unwrap();
    assert_eq!(c.get(&s.cookie, "/ui/tenants").await.0, 403);
}

#[tokio::test]
async fn usage_and_guard_pages_show_what_the_stores_hold() {
    let c = Console::start().await;
    for content in ["hello", "the old pagoda", "charge 4111 1111 1111 1111"] {
        c.g.post(Some(&c.acme), "/v1/chat/completions", chat_body(content, 4))
            .await;
    }
    c.g.gateway.flush().await;
    let cost = c.acme_cost().await;
    let s = c.session().await;
    let (status, page) = c.get(&s.cookie, "/ui/usage?days=1&by=hour").await;
    assert_eq!(status, 200);
    assert!(page.contains(&cost), "{cost} not in {page}");
    let (_, csv) = c.get(&s.cookie, "/ui/usage.csv?days=1").await;
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("day,tenant,model,requests"));
    let acme: Vec<&str> = lines.filter(|l| l.contains("\"acme\"")).collect();
    assert_eq!(acme.len(), 1, "{csv}");
    let fields: Vec<&str> = acme[0].split(',').collect();
    assert_eq!(fields[3], "2", "two requests were admitted: {csv}");
    assert_eq!(fields[7], cost);
    for bad in [
        "/ui/usage?days=0",
        "/ui/usage?days=400",
        "/ui/usage.csv?by=week",
    ] {
        assert_eq!(c.get(&s.cookie, bad).await.0, 400, "{bad}");
    }
    // Tenants: acme's spend against its daily budget.
    let tenants = c.get(&s.cookie, "/ui/tenants").await.1;
    assert!(tenants.contains(&format!("{cost} / 100")), "{tenants}");

    let (_, guard) = c.get(&s.cookie, "/ui/guard").await;
    let records = std::fs::read_to_string(c._dir.path().join("audit.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(records >= 3);
    let verified = format!("Hash chain verified: {records} records");
    assert!(guard.contains(&verified), "{guard}");
    assert!(
        guard.contains("CARD x1") && !guard.contains("4111"),
        "{guard}"
    );

    let (status, engine) = c.get(&s.cookie, "/ui/api/engine").await;
    assert_eq!(status, 200);
    let engine: serde_json::Value = serde_json::from_str(&engine).unwrap();
    assert!(engine["samples"].is_array());
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("console-screenshots")
}

#[tokio::test]
async fn console_in_a_real_browser() {
    let c = Console::start().await;
    for content in ["hello", "the old pagoda", "charge 4111 1111 1111 1111"] {
        c.g.post(Some(&c.acme), "/v1/chat/completions", chat_body(content, 4))
            .await;
    }
    c.g.gateway.flush().await;
    let cost = c.acme_cost().await;
    let dir = screenshot_dir();
    run_python(
        "test_console_browser.py",
        vec![
            c.url("").trim_end_matches('/').to_string(),
            c.admin.clone(),
            cost,
            dir.display().to_string(),
        ],
    )
    .await;
    let shots = std::fs::read_dir(&dir).unwrap().count();
    assert!(shots >= 8, "{shots} screenshots in {}", dir.display());
}
