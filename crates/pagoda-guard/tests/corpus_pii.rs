//! Precision and recall of the PII scanner on the committed, labelled corpus
//! (`testdata/guard/pii.jsonl`, built by `scripts/make_guard_corpus.py` plus hand-written
//! lines). A finding counts as a true positive only with the labelled type and exact text.

mod common;

use std::collections::BTreeMap;

use common::{corpus, Counts};
use pagoda_guard::{EntityKind, PiiScanner};

#[test]
fn pii_precision_and_recall_meet_the_floors() {
    let lines = corpus("pii.jsonl");
    assert!(lines.len() >= 300, "the corpus has {} texts", lines.len());
    let scanner = PiiScanner::new();
    let mut per_kind: BTreeMap<EntityKind, Counts> = BTreeMap::new();
    let mut misses = Vec::new();
    for line in &lines {
        let text = line["text"].as_str().unwrap();
        let mut expected: Vec<(EntityKind, String)> = line["entities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let kind = e["type"].as_str().unwrap().parse().unwrap();
                (kind, e["value"].as_str().unwrap().to_string())
            })
            .collect();
        for f in scanner.scan(text) {
            let value = &text[f.start..f.end];
            let c = per_kind.entry(f.kind).or_default();
            match expected
                .iter()
                .position(|(k, v)| *k == f.kind && v == value)
            {
                Some(i) => {
                    expected.remove(i);
                    c.tp += 1;
                }
                None => {
                    c.fp += 1;
                    misses.push(format!("FP {}: {text}", f.kind));
                }
            }
        }
        for (kind, _) in expected {
            per_kind.entry(kind).or_default().fn_ += 1;
            misses.push(format!("FN {kind}: {text}"));
        }
    }
    println!(
        "{:<8} {:>4} {:>4} {:>4} {:>9} {:>7}",
        "type", "tp", "fp", "fn", "precision", "recall"
    );
    for (kind, c) in &per_kind {
        println!(
            "{:<8} {:>4} {:>4} {:>4} {:>9.3} {:>7.3}",
            kind.name(),
            c.tp,
            c.fp,
            c.fn_,
            c.precision(),
            c.recall()
        );
    }
    for m in &misses {
        println!("{m}");
    }
    for kind in EntityKind::ALL {
        let c = per_kind.get(&kind).copied().unwrap_or_default();
        assert!(c.tp >= 10, "{kind}: only {} labelled examples found", c.tp);
        assert!(c.recall() >= 0.98, "{kind} recall {:.3}", c.recall());
        assert!(
            c.precision() >= 0.95,
            "{kind} precision {:.3}",
            c.precision()
        );
    }
}
