//! `pagoda audit verify` and `pagoda redteam` from the outside: exit codes, one-line errors,
//! table and JSON output.

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

    let (ok, stdout, stderr) = pagoda(&["redteam", "--target", &target]);
    assert!(!ok, "an obedient target must fail the run");
    assert!(
        stdout.contains("overall") && stdout.contains("roleplay.dan"),
        "{stdout}"
    );
    one_line_error(&stderr, "above --max-asr");

    let (ok, stdout, _) = pagoda(&["redteam", "--target", &target, "--json", "--max-asr", "1"]);
    assert!(ok);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(report["asr"].as_f64().unwrap() > 0.9);
    assert!(report["probes"].as_array().unwrap().len() >= 6);
}
