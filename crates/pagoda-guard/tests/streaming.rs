//! Streamed output is filtered exactly as the whole text would be, wherever the chunk
//! boundaries fall: entities split across chunks are caught, placeholders and canaries split
//! across chunks are restored or removed.

mod common;

use std::sync::Arc;

use common::corpus;
use pagoda_guard::stream::{CanaryStream, PiiStream, RestoreStream};
use pagoda_guard::{apply, Action, EntityKind, OutputGuard, PiiScanner, Placeholders};

fn redact_all() -> Arc<dyn Fn(EntityKind) -> Action + Send + Sync> {
    Arc::new(|_| Action::Redact)
}

fn stream_in(text: &str, cuts: &[usize]) -> String {
    let mut s = PiiStream::new(
        Arc::new(PiiScanner::new()),
        redact_all(),
        Placeholders::default(),
    );
    let mut out = String::new();
    let mut last = 0;
    for &c in cuts {
        out.push_str(&s.push(&text[last..c]));
        last = c;
    }
    out.push_str(&s.push(&text[last..]));
    out.push_str(&s.finish());
    out
}

fn whole(text: &str) -> String {
    let scanner = PiiScanner::new();
    apply(
        text,
        &scanner.scan(text),
        |_| Action::Redact,
        &mut Placeholders::default(),
    )
    .text
}

fn boundaries(text: &str) -> Vec<usize> {
    (1..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect()
}

#[test]
fn every_two_chunk_split_of_the_corpus_redacts_like_the_whole_text() {
    let mut checked = 0;
    for line in corpus("pii.jsonl") {
        let text = line["text"].as_str().unwrap();
        let expected = whole(text);
        for cut in boundaries(text) {
            let got = stream_in(text, &[cut]);
            assert_eq!(got, expected, "split at {cut} of {text:?}");
            checked += 1;
        }
    }
    assert!(checked > 10_000, "only {checked} splits");
}

#[test]
fn token_sized_chunks_redact_like_the_whole_text() {
    for line in corpus("pii.jsonl") {
        let text = line["text"].as_str().unwrap();
        let expected = whole(text);
        for step in [1, 2, 3, 5] {
            let cuts: Vec<usize> = boundaries(text).into_iter().step_by(step).collect();
            assert_eq!(stream_in(text, &cuts), expected, "step {step} of {text:?}");
        }
    }
}

#[test]
fn a_card_number_split_across_chunks_never_reaches_the_output() {
    let chunks = ["Your card 4111 11", "11 1111 ", "1111 is on file."];
    let mut s = PiiStream::new(
        Arc::new(PiiScanner::new()),
        redact_all(),
        Placeholders::default(),
    );
    let mut out: String = chunks.iter().map(|c| s.push(c)).collect();
    out.push_str(&s.finish());
    assert_eq!(out, "Your card [CARD_1] is on file.");
}

#[test]
fn placeholders_split_across_chunks_are_restored() {
    let mut p = Placeholders::default();
    p.placeholder_for(EntityKind::Email, "jane@example.com");
    p.placeholder_for(EntityKind::Phone, "13800138000");
    let text = "Write to [EMAIL_1] or call [PHONE_1]; [EMAIL_2] is unknown [sic].";
    let expected = "Write to jane@example.com or call 13800138000; [EMAIL_2] is unknown [sic].";
    for cut in boundaries(text) {
        let mut r = RestoreStream::new(p.clone());
        let mut out = r.push(&text[..cut]);
        out.push_str(&r.push(&text[cut..]));
        out.push_str(&r.finish());
        assert_eq!(out, expected, "split at {cut}");
    }
}

#[test]
fn a_canary_split_across_chunks_is_caught() {
    let canary = "pgd-0123456789abcdef";
    let text = format!("Sure! My instructions end with {canary} as you asked.");
    for cut in boundaries(&text) {
        let mut c = CanaryStream::new(canary.to_string());
        let mut out = c.push(&text[..cut]);
        out.push_str(&c.push(&text[cut..]));
        out.push_str(&c.finish());
        assert!(c.leaked, "split at {cut}");
        assert!(!out.contains(canary) && out.contains("[REDACTED]"), "{out}");
    }
}

#[test]
fn output_guard_redacts_new_pii_and_restores_the_callers_own() {
    let mut p = Placeholders::default();
    p.placeholder_for(EntityKind::Email, "me@example.com");
    let mut g = OutputGuard::new(
        Arc::new(PiiScanner::new()),
        None,
        false,
        Some(redact_all()),
        Some(p),
    );
    let mut out = String::new();
    for piece in ["I wrote to [EMA", "IL_1] and cc'd bo", "b@example.org", "."] {
        out.push_str(&g.push(piece).text);
    }
    out.push_str(&g.finish().text);
    assert_eq!(out, "I wrote to me@example.com and cc'd [EMAIL_2].");
    assert_eq!(g.report().counts[&EntityKind::Email], 1);
}

#[test]
fn output_guard_ends_the_response_on_a_leak_when_asked() {
    let canary = "pgd-feedfacecafebeef".to_string();
    let mut g = OutputGuard::new(
        Arc::new(PiiScanner::new()),
        Some(canary.clone()),
        true,
        None,
        None,
    );
    let first = g.push("Here is my prompt: (Internal marker pgd-feed");
    let second = g.push("facecafebeef: confidential)");
    assert!(!first.stop && second.stop);
    let sent = format!("{}{}", first.text, second.text);
    assert!(!sent.contains("pgd-feed"), "{sent}");
    assert!(g.report().canary_leaked);
}
