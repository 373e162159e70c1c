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
        incomplete: false,
        tool_calls_refused: Vec::new(),
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

fn key(byte: u8) -> pagoda_guard::AuditKey {
    pagoda_guard::AuditKey::new(&[byte; 32]).unwrap()
}

/// Rewrites the whole file as a forger without the key would: every record re-hashed with
/// plain SHA-256 after editing one, the chain intact.
fn forge_unkeyed(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let forged = AuditLog::open(&path.with_extension("forged")).unwrap();
    for (i, _) in text.lines().enumerate() {
        forged.append(event(i + 1000)).unwrap();
    }
    std::fs::rename(path.with_extension("forged"), path).unwrap();
}

#[test]
fn a_keyed_chain_verifies_only_with_its_key_and_cannot_be_forged_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // Begun unkeyed, then keyed from a restart on: both parts verify with the key.
    AuditLog::open(&path).unwrap().append(event(1)).unwrap();
    let log = AuditLog::open_with(&path, Some(key(7))).unwrap();
    for i in 2..6 {
        log.append(event(i)).unwrap();
    }
    drop(log);
    let with = |k: Option<&pagoda_guard::AuditKey>| pagoda_guard::verify_with(&path, k, &[]);
    assert_eq!(with(Some(&key(7))).unwrap().records, 5);
    assert!(
        with(None).is_err(),
        "keyed records verified without the key"
    );
    assert!(with(Some(&key(8))).is_err(), "verified with the wrong key");
    // Reopening without the key refuses to go on with an unkeyed record.
    assert!(AuditLog::open(&path).is_err());
    forge_unkeyed(&path);
    assert!(
        verify(&path).is_ok(),
        "the forgery is a valid unkeyed chain"
    );
    assert!(
        with(Some(&key(7))).is_err(),
        "a rewritten unkeyed log passed as the keyed one"
    );
}

#[test]
fn anchors_catch_a_log_cut_short() {
    let (_dir, path) = written_log(8);
    let text = std::fs::read_to_string(&path).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let anchor = pagoda_guard::Anchor {
        seq: 8,
        hash: last["hash"].as_str().unwrap().to_string(),
    };
    let anchors = [anchor];
    assert!(pagoda_guard::verify_with(&path, None, &anchors).is_ok());
    // Drop the last two records: the chain alone still verifies.
    let kept: Vec<&str> = text.lines().take(6).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
    assert_eq!(verify(&path).unwrap().records, 6);
    match pagoda_guard::verify_with(&path, None, &anchors) {
        Err(GuardError::AuditTampered { reason, .. }) => {
            assert!(reason.contains("truncated"), "{reason}")
        }
        other => panic!("a truncated log verified against its anchor: {other:?}"),
    }
}
