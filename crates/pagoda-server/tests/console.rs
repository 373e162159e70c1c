//! The operator console at /ui over HTTP: nothing without an admin session, sign-in only
//! with an admin tenant's live key, CSRF and origin checks on every write, a created key's
//! secret in exactly one response, writes recorded in the admin log, and the pages showing
//! what the stores hold, the reports page showing what the real bench, plan and red-team
//! tools saved (and nothing outside its folder). `console_in_a_real_browser` drives the same
//! pages in headless Chromium (tests/python/test_console_browser.py).

mod common;
mod console_support;

use std::path::{Path, PathBuf};

use common::gateway::{GatewayServer, PRICES};
use common::{chat_body, run_python, MODEL};
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
const PAGES: [&str; 12] = [
    "/ui",
    "/ui/engine",
    "/ui/api/engine",
    "/ui/tenants",
    "/ui/usage",
    "/ui/usage.csv",
    "/ui/guard",
    "/ui/reports",
    "/ui/reports/notes.json",
    "/ui/reports/svg/plain.svg",
    "/ui/console.js",
    "/ui/no-such-page",
];

/// A plot with a script in it: served, but never able to run.
const PLAIN_SVG: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"60\" height=\"20\">\
    <text x=\"2\" y=\"15\">PLAINPLOT</text><script>alert(1)</script></svg>";

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
        // The reports folder: a plot, a corrupt report, links to files outside it.
        let reports = dir.path().join("reports");
        std::fs::create_dir(&reports).unwrap();
        std::fs::write(reports.join("plain.svg"), PLAIN_SVG).unwrap();
        std::fs::write(reports.join("notes.json"), "{\"runs\": [").unwrap();
        std::fs::write(dir.path().join("secret.svg"), "<svg>TOP-SECRET</svg>").unwrap();
        std::fs::write(dir.path().join("secret.json"), "{\"TOP-SECRET\": 1}").unwrap();
        for name in ["secret.svg", "secret.json"] {
            let link = reports.join(name.replace("secret", "link"));
            std::os::unix::fs::symlink(dir.path().join(name), link).unwrap();
        }
        g.server.state.set_console_reports_dir(reports);
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

    fn reports(&self) -> PathBuf {
        self._dir.path().join("reports")
    }

    /// Every kind of report, written by the real tools (a tenant of its own runs the bench,
    /// so acme's usage stays as the other tests expect).
    async fn save_reports(&self) {
        let key = self.g.key("bench");
        let base = self.url("");
        console_support::save_reports(base.trim_end_matches('/'), &key, MODEL, &self.reports())
            .await;
    }

    /// A request exactly as written, unnormalised by any client: for paths with `..` and
    /// encoded slashes.
    async fn raw_get(&self, cookie: &str, path: &str) -> (u16, String) {
        let addr = self.g.server.base.trim_start_matches("http://").to_string();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
        );
        tokio::task::spawn_blocking(move || {
            use std::io::{Read, Write};
            let mut stream = std::net::TcpStream::connect(&addr).unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut bytes = Vec::new();
            stream.read_to_end(&mut bytes).unwrap();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let status = text.split(' ').nth(1).unwrap().parse().unwrap();
            (status, text)
        })
        .await
        .unwrap()
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
            assert!(
                !body.contains("PLAINPLOT") && !body.contains("notes.json"),
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
    for path in PAGES.iter().filter(|p| !p.ends_with("no-such-page")) {
        let (status, body) = c.get(&s.cookie, path).await;
        assert_eq!(status, 403, "{path}");
        assert!(
            !body.contains("PLAINPLOT") && !body.contains("acme"),
            "{path}"
        );
    }
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

/// Where `needle` first appears in `page`, for ordering checks.
fn at(page: &str, needle: &str) -> usize {
    page.find(needle)
        .unwrap_or_else(|| panic!("{needle} not in {page}"))
}

#[tokio::test]
async fn reports_page_shows_what_the_tools_saved_and_nothing_outside_its_folder() {
    let c = Console::start().await;
    c.save_reports().await;
    let s = c.session().await;
    let dir = c.reports();

    // The list: every report with its kind, newest first; the corrupt one unreadable; the
    // links to files outside the folder not listed.
    let (status, list) = c.get(&s.cookie, "/ui/reports").await;
    assert_eq!(status, 200);
    let order: Vec<usize> = [
        "redteam.json",
        "plan.json",
        "profile.json",
        "bench.json",
        "notes.json",
        "old-redteam.json",
    ]
    .iter()
    .map(|name| at(&list, &format!("href=\"/ui/reports/{name}\"")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}: {list}");
    for kind in [
        "bench serve",
        "bench profile",
        "plan",
        "red team",
        "unreadable",
    ] {
        assert!(list.contains(&format!(">{kind}<")), "{kind}: {list}");
    }
    assert!(list.contains("not JSON"), "{list}");
    assert!(
        !list.contains("link.") && !list.contains("TOP-SECRET"),
        "{list}"
    );
    assert!(list.contains("2 file(s) not shown"), "{list}");
    for plot in [
        "latency_cdf.svg",
        "sweep.svg",
        "goodput_search.svg",
        "plain.svg",
    ] {
        assert!(list.contains(&format!("/ui/reports/svg/{plot}")), "{plot}");
    }

    // bench serve: every level's figures as the JSON has them, and both plots.
    let bench = pagoda_bench::BenchReport::read(&dir.join("bench.json")).unwrap();
    let (status, page) = c.get(&s.cookie, "/ui/reports/bench.json").await;
    assert_eq!(status, 200);
    assert_eq!(bench.runs.len(), 2);
    for run in &bench.runs {
        assert_eq!(run.failed, 0, "{:?}", run.error_examples);
        for figure in [
            format!("<td>{}</td>", run.load),
            format!("<td>{:.2}</td>", run.request_throughput),
            format!("<td>{:.1}</td>", run.output_token_throughput),
            format!("<td>{:.1}</td>", run.ttft_ms.median),
            format!("<td>{:.1}</td>", run.ttft_ms.p99),
        ] {
            assert!(page.contains(&figure), "{figure} not in {page}");
        }
    }
    for plot in ["latency_cdf.svg", "sweep.svg"] {
        assert!(
            page.contains(&format!("<img src=\"/ui/reports/svg/{plot}\"")),
            "{page}"
        );
    }

    // bench profile and the plan made from it.
    let profile = pagoda_bench::profile_format::Profile::read(&dir.join("profile.json")).unwrap();
    let page = c.get(&s.cookie, "/ui/reports/profile.json").await.1;
    assert!(page.contains("id=\"profile-loads\""), "{page}");
    assert!(
        page.contains(&format!("{:.1} prompt tokens/s", profile.prefill_tps)),
        "{page}"
    );
    let plan = pagoda_bench::plan_report::PlanReport::read(&dir.join("plan.json")).unwrap();
    let page = c.get(&s.cookie, "/ui/reports/plan.json").await.1;
    assert!(page.contains("25% prefix-cache hits"), "{page}");
    let shared = format!(
        "<td>colocated</td><td>shared</td><td>{}</td>",
        plan.plan.colocated.replicas
    );
    assert!(page.contains(&shared), "{shared} not in {page}");

    // The goodput search: every rate measured, the answer, its plot.
    let page = c.get(&s.cookie, "/ui/reports/goodput_search.json").await.1;
    assert!(page.contains("id=\"goodput-points\""), "{page}");
    assert!(
        page.contains("<td>4.00</td>") && page.contains("<td>8.00</td>"),
        "{page}"
    );
    assert!(
        page.contains("<img src=\"/ui/reports/svg/goodput_search.svg\""),
        "{page}"
    );

    // A corrupt report is a page saying so, not an error.
    let (status, page) = c.get(&s.cookie, "/ui/reports/notes.json").await;
    assert_eq!(status, 200);
    assert!(
        page.contains("id=\"report-error\"") && page.contains("unreadable"),
        "{page}"
    );

    // The Guardrails page: the newest red-team report, per pack and in total.
    let saved: pagoda_redteam::SavedReport =
        serde_json::from_str(&std::fs::read_to_string(dir.join("redteam.json")).unwrap()).unwrap();
    let guard = c.get(&s.cookie, "/ui/guard").await.1;
    assert!(
        guard.contains("id=\"redteam-packs\"") && guard.contains("redteam.json"),
        "{guard}"
    );
    assert!(
        !guard.contains("old-pack.yaml"),
        "the older report is not the newest"
    );
    for pack in [
        "roleplay_jailbreak",
        "system_prompt_extraction",
        "pii_exfiltration",
    ] {
        assert!(
            guard.contains(&format!("<td>{pack}</td>")),
            "{pack}: {guard}"
        );
    }
    let total = format!(
        "<td><b>total</b></td><td>{}</td><td>{}</td><td>{}</td>",
        saved.report.probes.len(),
        saved.report.attempts,
        saved.report.successes
    );
    assert!(guard.contains(&total), "{total} not in {guard}");
    assert!(
        guard.contains("<b>1.00</b>"),
        "every attack on the obedient target succeeds"
    );

    // A plot: as saved, as an image that may not run anything.
    let r = c
        .client
        .get(c.url("/ui/reports/svg/latency_cdf.svg"))
        .header(COOKIE, &s.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let h = r.headers().clone();
    assert_eq!(h["content-type"], "image/svg+xml");
    assert_eq!(
        h["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    );
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert_eq!(h["cache-control"], "no-store");
    let svg = r.bytes().await.unwrap();
    assert_eq!(svg, std::fs::read(dir.join("latency_cdf.svg")).unwrap());

    // Nothing outside the folder, however the name is spelled; links inside it are not
    // followed.
    let secret = c._dir.path().join("secret.svg").display().to_string();
    let absolute = secret.replace('/', "%2F");
    for path in [
        "/ui/reports/svg/..%2Fsecret.svg".to_string(),
        "/ui/reports/svg/%2e%2e%2fsecret.svg".into(),
        "/ui/reports/svg/..%5Csecret.svg".into(),
        "/ui/reports/svg/../secret.svg".into(),
        "/ui/reports/svg/../../secret.svg".into(),
        "/ui/reports/svg/..".into(),
        "/ui/reports/svg/%2e%2e".into(),
        format!("/ui/reports/svg/{absolute}"),
        format!("/ui/reports/svg/{secret}"),
        "/ui/reports/svg/link.svg".into(),
        "/ui/reports/svg/.hidden.svg".into(),
        "/ui/reports/..%2Fsecret.json".into(),
        "/ui/reports/%2e%2e%2fsecret.json".into(),
        format!("/ui/reports/{}", absolute.replace(".svg", ".json")),
        "/ui/reports/link.json".into(),
        "/ui/reports/plain.svg".into(),
        "/ui/reports/svg/notes.json".into(),
    ] {
        let (status, text) = c.raw_get(&s.cookie, &path).await;
        assert!(matches!(status, 400 | 404), "{path}: {status}");
        assert!(!text.contains("TOP-SECRET"), "{path}: {text}");
    }
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
    c.save_reports().await;
    let dir = screenshot_dir();
    let new_shots: Vec<PathBuf> = ["reports", "report-bench"]
        .iter()
        .flat_map(|page| {
            ["1280x800", "390x844"].map(|size| dir.join(format!("console-{page}-{size}.png")))
        })
        .collect();
    for shot in &new_shots {
        std::fs::remove_file(shot).ok();
    }
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
    assert!(shots >= 12, "{shots} screenshots in {}", dir.display());
    for shot in new_shots {
        assert!(shot.exists(), "{} was not taken", shot.display());
    }
}
