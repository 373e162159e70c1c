//! The gateway through the real binary: the keys commands, durability of cost events across
//! `kill -9`, and API keys never showing up in logs, errors or the database.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use pagoda_gateway::sink::sqlite::read_events;
use pagoda_gateway::Status;

fn pagoda() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagoda"))
}

fn model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/models/tiny-qwen2")
}

/// Runs `pagoda ARGS` and returns (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let out = pagoda().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn create_key(db: &Path, tenant: &str) -> String {
    let (ok, stdout, stderr) = run(&[
        "keys",
        "create",
        "--gateway-db",
        db.to_str().unwrap(),
        "--tenant",
        tenant,
    ]);
    assert!(ok, "{stderr}");
    stdout.trim().to_string()
}

fn assert_one_line_failure((ok, _, stderr): (bool, String, String), needle: &str) {
    assert!(!ok, "should fail");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one error line expected: {stderr}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(needle),
        "{stderr}"
    );
}

#[test]
fn keys_are_created_listed_revoked_and_bad_input_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let db_arg = db.to_str().unwrap();
    let key = create_key(&db, "acme");
    assert!(
        key.starts_with("pgd_") && key.len() == 4 + 16 + 1 + 64,
        "{key}"
    );
    let id = &key[4..20];
    let (ok, list, _) = run(&["keys", "list", "--gateway-db", db_arg]);
    assert!(ok);
    assert!(list.contains(id) && list.contains("acme") && list.contains("active"));
    assert!(
        !list.contains(&key[21..]),
        "the secret must never be listed"
    );
    let (ok, _, stderr) = run(&["keys", "revoke", "--gateway-db", db_arg, id]);
    assert!(ok, "{stderr}");
    let (_, list, _) = run(&["keys", "list", "--gateway-db", db_arg]);
    assert!(list.contains("revoked"));
    let (ok, _, stderr) = run(&[
        "keys",
        "create",
        "--gateway-db",
        db_arg,
        "--tenant",
        "acme",
        "--expires",
        "2099-01-31",
        "--name",
        "ci",
    ]);
    assert!(ok, "{stderr}");
    assert_one_line_failure(
        run(&[
            "keys",
            "create",
            "--gateway-db",
            db_arg,
            "--tenant",
            "acme",
            "--expires",
            "someday",
        ]),
        "someday",
    );
    assert_one_line_failure(
        run(&[
            "keys",
            "create",
            "--gateway-db",
            db_arg,
            "--tenant",
            "acme",
            "--expires",
            "2001-01-01",
        ]),
        "past",
    );
    assert_one_line_failure(
        run(&["keys", "revoke", "--gateway-db", db_arg, "0000000000000000"]),
        "no key",
    );
    assert_one_line_failure(
        run(&["usage", "--gateway-db", db_arg, "--group-by", "colour"]),
        "colour",
    );
    assert_one_line_failure(
        run(&[
            "usage",
            "--gateway-db",
            dir.path().join("none.db").to_str().unwrap(),
        ]),
        "no gateway database",
    );
}

/// `pagoda serve` behind a gateway; its stderr is collected as it runs.
struct Served {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

fn serve(dir: &Path, extra_env: &[(&str, &str)]) -> Served {
    std::fs::write(
        dir.join("gw.toml"),
        "[pricing.\"tiny-qwen2\"]\ninput = \"0.50\"\ncached_input = \"0.05\"\noutput = \"1.50\"\n[tenants.root]\nadmin = true\n",
    )
    .unwrap();
    let mut cmd = pagoda();
    cmd.args(["serve", "--model"])
        .arg(model())
        .args([
            "--served-model-name",
            "tiny-qwen2",
            "--port",
            "0",
            "--kv-cache-memory",
            "32MiB",
        ])
        .arg("--gateway-db")
        .arg(dir.join("gw.db"))
        .arg("--gateway-config")
        .arg(dir.join("gw.toml"));
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let (child, port, log) = common::spawn_and_wait_for_port(cmd);
    let served = Served { child, port, log };
    while http(served.port, "GET", "/health", None, "").0 != 200 {
        assert!(Instant::now() < deadline, "server not healthy");
        std::thread::sleep(Duration::from_millis(20));
    }
    served
}

/// One HTTP/1.1 request on its own connection; (status, body).
fn http(port: u16, method: &str, path: &str, key: Option<&str>, body: &str) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let sent = write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut response = String::new();
    // A server killed mid-response resets the connection: that response did not complete.
    if sent.is_err() || stream.read_to_string(&mut response).is_err() {
        return (0, response);
    }
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

#[test]
fn events_of_completed_responses_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let key = create_key(&dir.path().join("gw.db"), "acme");
    let mut served = serve(dir.path(), &[]);
    // Sixteen clients keep the server busy, so the metering writer always has a queue; the
    // server is killed the moment the 80th response has been read to its end.
    let done = Arc::new(Mutex::new(Vec::<u64>::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..16)
        .map(|c| {
            let (key, done, stop, port) = (key.clone(), done.clone(), stop.clone(), served.port);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let max_tokens = 1 + (c + i) % 5;
                    let stream = (c + i).is_multiple_of(3);
                    let body = format!(
                        r#"{{"prompt": "client {c} request {i}", "max_tokens": {max_tokens}, "stream": {stream}, "ignore_eos": true}}"#
                    );
                    let (status, text) = http(port, "POST", "/v1/completions", Some(&key), &body);
                    let complete = status == 200 && (!stream || text.contains("[DONE]")) && (stream || text.ends_with('}'));
                    if complete {
                        done.lock().unwrap().push(max_tokens);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if done.lock().unwrap().len() >= 80 {
            served.child.kill().unwrap();
            break;
        }
        assert!(Instant::now() < deadline, "too slow");
        std::thread::yield_now();
    }
    let received = done.lock().unwrap().len();
    served.child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for client in clients {
        client.join().unwrap();
    }
    let events = read_events(&dir.path().join("gw.db")).unwrap();
    let completed = events
        .iter()
        .filter(|e| e.status == Status::Completed)
        .count();
    assert!(
        completed >= received,
        "{received} responses were read to the end but only {completed} events are on disk"
    );
    assert!(events.iter().all(|e| e.tenant.as_str() == "acme"));
    // `pagoda usage` reads the same store: one row for the tenant and model, all events in it.
    let db = dir.path().join("gw.db");
    let (ok, stdout, stderr) = run(&[
        "usage",
        "--gateway-db",
        db.to_str().unwrap(),
        "--group-by",
        "model",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert_eq!(rows[0]["tenant"], "acme");
    assert_eq!(rows[0]["model"], "tiny-qwen2");
    assert_eq!(rows[0]["requests"].as_u64().unwrap() as usize, events.len());
    let cost: rust_decimal::Decimal = rows[0]["cost"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        cost,
        events.iter().map(|e| e.cost).sum::<rust_decimal::Decimal>()
    );
    let (ok, table, _) = run(&[
        "usage",
        "--gateway-db",
        db.to_str().unwrap(),
        "--tenant",
        "acme",
    ]);
    assert!(
        ok && table.contains("acme") && table.contains("tiny-qwen2"),
        "{table}"
    );
}

#[test]
fn api_keys_never_appear_in_logs_errors_or_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gw.db");
    let key = create_key(&db, "acme");
    let revoked = create_key(&db, "acme");
    let (ok, _, _) = run(&[
        "keys",
        "revoke",
        "--gateway-db",
        db.to_str().unwrap(),
        &revoked[4..20],
    ]);
    assert!(ok);
    let admin = create_key(&db, "root");
    let mut served = serve(dir.path(), &[("RUST_LOG", "debug")]);
    let secret = &key[21..];
    let wrong_secret = format!("{}{}", &key[..21], "0".repeat(64));
    let mut bodies = Vec::new();
    let request = r#"{"prompt": "hello", "max_tokens": 2}"#;
    for k in [
        key.as_str(),
        revoked.as_str(),
        wrong_secret.as_str(),
        &key[..30],
        secret,
    ] {
        bodies.push(http(
            served.port,
            "POST",
            "/v1/completions",
            Some(k),
            request,
        ));
        bodies.push(http(
            served.port,
            "POST",
            "/v1/chat/completions",
            Some(k),
            "{not json",
        ));
        bodies.push(http(
            served.port,
            "GET",
            "/v1/usage?tenant=acme",
            Some(k),
            "",
        ));
    }
    bodies.push(http(
        served.port,
        "GET",
        "/v1/usage?group_by=model,hour",
        Some(&admin),
        "",
    ));
    bodies.push(http(served.port, "GET", "/metrics", None, ""));
    assert_eq!(bodies[0].0, 200, "{}", bodies[0].1);
    assert_eq!(bodies[3].0, 401);
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    let log = served.log.lock().unwrap().clone();
    assert!(log.contains("DEBUG"), "debug logging was on");
    let mut haystacks: Vec<(String, String)> = bodies
        .into_iter()
        .enumerate()
        .map(|(i, (_, b))| (format!("response {i}"), b))
        .collect();
    haystacks.push(("log".into(), log));
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            let bytes = std::fs::read(&path).unwrap();
            haystacks.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    for presented in [key.as_str(), revoked.as_str(), admin.as_str()] {
        let secret = &presented[21..];
        for (name, text) in &haystacks {
            assert!(!text.contains(secret), "a key's secret appears in {name}");
        }
    }
}

/// Prices follow the served model, never the alias a client names; with budgets set, a
/// served model without a price would be free to use, so the server refuses to start.
#[test]
fn budgets_with_an_unpriced_served_model_refuse_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("gw.toml");
    std::fs::write(
        &policy,
        "[pricing.\"cheap-alias\"]\ninput = \"0\"\noutput = \"0\"\n[tenants.acme]\nbudget = { daily = \"1\" }\n",
    )
    .unwrap();
    let model = model();
    let db = dir.path().join("gw.db");
    let result = run(&[
        "serve",
        "--model",
        model.to_str().unwrap(),
        "--served-model-name",
        "tiny-qwen2,cheap-alias",
        "--port",
        "0",
        "--kv-cache-memory",
        "32MiB",
        "--gateway-db",
        db.to_str().unwrap(),
        "--gateway-config",
        policy.to_str().unwrap(),
    ]);
    let (ok, _, stderr) = result;
    assert!(!ok, "the server started: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("no price for the model `tiny-qwen2`"),
        "{stderr}"
    );
    assert_eq!(
        last.matches("no price").count(),
        1,
        "the cause is said once: {last}"
    );
}
