//! The audit log's chain: concurrent writers produce a valid chain, and any edit to the
//! file (a changed byte, a deleted line, reordered lines) makes `verify` fail.

use std::collections::BTreeMap;
use std::sync::Arc;

use pagoda_guard::audit::{AuditEvent, AuditLog, Decision, Stage};
use pagoda_guard::{verify, EntityKind, GuardError, RuleId};

fn event(i: usize) -> AuditEvent {
    AuditEvent {
        request_id: format!("chatcmpl-{i}"),
        tenant: Some(
            if i.is_multiple_of(2) {
                "acme"
            } else {
                "globex"
            }
            .into(),
        ),
        stage: if i.is_multiple_of(3) {
            Stage::Response
        } else {
            Stage::Request
        },
        decision: Decision::Transform,
        entities: BTreeMap::from([(EntityKind::Email, i % 4 + 1)]),
        rules: vec![RuleId("override.ignore_previous".into())],
        injection_score: Some(0.9),
        canary_leaked: false,
        prompt_leaked: false,
    }
}

fn written_log(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = Arc::new(AuditLog::open(&path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..n / 4 {
                    log.append(event(t * 100 + i)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    (dir, path)
}

fn tampered_line(path: &std::path::Path) -> Option<usize> {
    match verify(path) {
        Ok(_) => None,
        Err(GuardError::AuditTampered { line, .. }) => Some(line),
        Err(e) => panic!("unexpected {e}"),
    }
}

#[test]
fn concurrent_writers_make_one_valid_chain() {
    let (_dir, path) = written_log(40);
    assert_eq!(verify(&path).unwrap().records, 40);
}

#[test]
fn reopening_continues_the_chain() {
    let (_dir, path) = written_log(8);
    let log = AuditLog::open(&path).unwrap();
    let record = log.append(event(99)).unwrap();
    assert_eq!(record.seq, 9);
    assert_eq!(verify(&path).unwrap().records, 9);
}

#[test]
fn changing_any_byte_is_detected() {
    let (_dir, path) = written_log(8);
    let original = std::fs::read(&path).unwrap();
    for i in 0..original.len() {
        let mut bytes = original.clone();
        bytes[i] = if bytes[i] == b'1' { b'2' } else { b'1' };
        std::fs::write(&path, &bytes).unwrap();
        let line = original[..i].iter().filter(|&&b| b == b'\n').count() + 1;
        let found = tampered_line(&path);
        assert!(found.is_some(), "byte {i} changed and verify passed");
        assert!(
            found.unwrap() <= line + 1,
            "byte {i} on line {line}, reported {found:?}"
        );
    }
}

#[test]
fn deleting_or_reordering_lines_is_detected() {
    let (_dir, path) = written_log(8);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for k in 0..lines.len() - 1 {
        let mut kept = lines.clone();
        kept.remove(k);
        std::fs::write(&path, kept.join("\n") + "\n").unwrap();
        assert_eq!(tampered_line(&path), Some(k + 1), "deleted line {}", k + 1);

        let mut swapped = lines.clone();
        swapped.swap(k, k + 1);
        std::fs::write(&path, swapped.join("\n") + "\n").unwrap();
        assert_eq!(
            tampered_line(&path),
            Some(k + 1),
            "swapped lines {} and {}",
            k + 1,
            k + 2
        );
    }
}

#[test]
fn records_carry_types_and_counts_but_no_values() {
    let (_dir, path) = written_log(4);
    let text = std::fs::read_to_string(&path).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(first["entities"]["EMAIL"].as_u64().is_some());
    assert_eq!(
        first["prev_hash"].as_str().unwrap(),
        pagoda_guard::audit::GENESIS
    );
    assert_eq!(first["hash"].as_str().unwrap().len(), 64);
}
