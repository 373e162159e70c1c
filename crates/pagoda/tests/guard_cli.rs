//! `pagoda audit verify` and `pagoda redteam` from the outside: exit codes, one-line errors,
//! table and JSON output.

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use pagoda_guard::audit::{AuditEvent, AuditLog, Decision, Stage};

fn pagoda(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pagoda"))
        .args(args)
        .env_remove("PAGODA_REDTEAM_API_KEY")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_line_error(stderr: &str, expect: &str) {
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "not one line: {stderr}"
    );
    assert!(
        stderr.starts_with("error: ") && stderr.contains(expect),
        "{stderr}"
    );
}

#[test]
fn audit_verify_accepts_an_intact_log_and_names_the_tampered_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path).unwrap();
    for i in 0..3 {
        log.append(AuditEvent {
            request_id: format!("req-{i}"),
            tenant: None,
            stage: Stage::Request,
            decision: Decision::Allow,
            entities: BTreeMap::new(),
            rules: vec![],
            injection_score: None,
            canary_leaked: false,
            prompt_leaked: false,
            incomplete: false,
            tool_calls_refused: Vec::new(),
        })
        .unwrap();
    }
    let file = path.to_str().unwrap();
    let (ok, stdout, _) = pagoda(&["audit", "verify", file]);
    assert!(ok && stdout.contains("3 records"), "{stdout}");

    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("req-1", "req-7", 1)).unwrap();
    let (ok, _, stderr) = pagoda(&["audit", "verify", file]);
    assert!(!ok);
    one_line_error(&stderr, "line 2");
}

#[test]
fn redteam_refuses_bad_input_with_one_line() {
    let (ok, _, stderr) = pagoda(&["redteam", "--target", "not a url"]);
    assert!(!ok);
    one_line_error(&stderr, "invalid target URL");
    let (ok, _, stderr) = pagoda(&["redteam", "--target", "ftp://127.0.0.1:9"]);
    assert!(!ok);
    one_line_error(&stderr, "invalid target URL");
    // Nothing listens on port 9: the https client starts, the connection fails, one line.
    let (ok, _, stderr) = pagoda(&["redteam", "--target", "https://127.0.0.1:9"]);
    assert!(!ok);
    one_line_error(&stderr, "cannot reach");
    let (ok, _, stderr) = pagoda(&[
        "redteam",
        "--target",
        "http://127.0.0.1:9",
        "--probes",
        "/nonexistent.yaml",
    ]);
    assert!(!ok);
    one_line_error(&stderr, "cannot read probe file");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "probes: [{id: x}]").unwrap();
    let (ok, _, stderr) = pagoda(&[
        "redteam",
        "--target",
        "http://127.0.0.1:9",
        "--probes",
        bad.to_str().unwrap(),
    ]);
    assert!(!ok);
    one_line_error(&stderr, "invalid probes");
    let (ok, _, stderr) = pagoda(&[
        "redteam",
        "--target",
        "http://127.0.0.1:9",
        "--max-asr",
        "2",
    ]);
    assert!(!ok);
    one_line_error(&stderr, "--max-asr");
}

#[test]
fn redteam_fails_the_job_above_max_asr_and_passes_below() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let target = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(pagoda_redteam::obedient::serve(listener, None));

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("redteam.json");
    let out_flag = out.to_str().unwrap();
    let (ok, stdout, stderr) = pagoda(&["redteam", "--target", &target, "--out", out_flag]);
    assert!(!ok, "an obedient target must fail the run");
    assert!(
        stdout.contains("overall") && stdout.contains("roleplay.dan"),
        "{stdout}"
    );
    one_line_error(&stderr, "above --max-asr");
    // The report is saved even when the job fails: that is when it is wanted.
    let saved: pagoda_redteam::SavedReport =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(saved.pack, "builtin");
    assert!(saved.tool.starts_with("pagoda-redteam"));
    assert!(saved.report.asr > 0.9 && saved.report.probes.len() >= 6);

    let (ok, stdout, _) = pagoda(&["redteam", "--target", &target, "--json", "--max-asr", "1"]);
    assert!(ok);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(report["asr"].as_f64().unwrap() > 0.9);
    assert!(report["probes"].as_array().unwrap().len() >= 6);
}

/// The real server with a keyed audit log and a gateway: the log verifies with its key and
/// against the anchor the server left at exit; without the key, or cut short, it does not.
#[test]
fn a_served_keyed_log_verifies_with_its_key_and_its_anchors_catch_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(path("guard.toml"), "").unwrap();
    std::fs::write(path("audit.key"), "0123456789abcdef0123456789abcdef\n").unwrap();
    let (ok, key, stderr) = pagoda(&[
        "keys",
        "create",
        "--gateway-db",
        &path("gw.db"),
        "--tenant",
        "acme",
    ]);
    assert!(ok, "{stderr}");
    let key = key.trim().to_string();
    let mut server = common::Server::start(&[
        "--gateway-db",
        &path("gw.db"),
        "--guard-config",
        &path("guard.toml"),
        "--audit-log",
        &path("audit.jsonl"),
        "--audit-key",
        &path("audit.key"),
    ]);
    for i in 0..3 {
        let body = format!(r#"{{"model":"tiny-qwen2","prompt":"Hello {i}","max_tokens":2}}"#);
        let request = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let r = common::raw(server.port, request.as_bytes());
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert!(server.terminate().success(), "{}", server.log());
    let log = path("audit.jsonl");
    let (ok, stdout, stderr) = pagoda(&[
        "audit",
        "verify",
        &log,
        "--key",
        &path("audit.key"),
        "--anchors",
        &path("gw.db"),
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("6 records") && stdout.contains("keyed") && stdout.contains("1 anchors"),
        "{stdout}"
    );
    let (ok, _, stderr) = pagoda(&["audit", "verify", &log]);
    assert!(!ok, "a keyed log verified without its key");
    one_line_error(&stderr, "key");
    // The last two records cut off: the chain alone still holds, the anchor does not.
    let text = std::fs::read_to_string(&log).unwrap();
    let kept: Vec<&str> = text.lines().take(4).collect();
    std::fs::write(&log, kept.join("\n") + "\n").unwrap();
    let (ok, _, _) = pagoda(&["audit", "verify", &log, "--key", &path("audit.key")]);
    assert!(ok);
    let (ok, _, stderr) = pagoda(&[
        "audit",
        "verify",
        &log,
        "--key",
        &path("audit.key"),
        "--anchors",
        &path("gw.db"),
    ]);
    assert!(!ok, "a truncated log verified against its anchors");
    one_line_error(&stderr, "truncated");
}
