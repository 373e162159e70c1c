//! Recall and false-positive rate of the injection detector on the committed, labelled
//! corpus (`testdata/guard/injection.jsonl`), at the default policy threshold.

mod common;

use std::collections::BTreeMap;

use common::{corpus, Counts};
use pagoda_guard::{Detector, Policy, RuleDetector};

#[test]
fn injection_recall_and_false_positives_meet_the_floors() {
    let lines = corpus("injection.jsonl");
    assert!(lines.len() >= 300, "the corpus has {} texts", lines.len());
    let threshold = Policy::default().injection_threshold;
    let detector = RuleDetector::new();
    let mut by_group: BTreeMap<String, Counts> = BTreeMap::new();
    let (mut all, mut benign, mut flagged_benign) = (Counts::default(), 0usize, 0usize);
    for line in &lines {
        let text = line["text"].as_str().unwrap();
        let attack = line["label"] == "injection";
        let verdict = detector.detect(text);
        let flagged = verdict.score >= threshold;
        let group = format!(
            "{}/{}",
            line["lang"].as_str().unwrap(),
            line["category"].as_str().unwrap()
        );
        let c = by_group.entry(group).or_default();
        match (attack, flagged) {
            (true, true) => {
                c.tp += 1;
                all.tp += 1;
            }
            (true, false) => {
                c.fn_ += 1;
                all.fn_ += 1;
                println!("MISSED ({:.2}): {text}", verdict.score);
            }
            (false, true) => {
                c.fp += 1;
                all.fp += 1;
                println!(
                    "FALSE POSITIVE ({:.2} {:?}): {text}",
                    verdict.score, verdict.rules
                );
            }
            (false, false) => {}
        }
        if !attack {
            benign += 1;
            flagged_benign += usize::from(flagged);
        }
    }
    println!("{:<18} {:>4} {:>4} {:>4}", "group", "tp", "fp", "fn");
    for (g, c) in &by_group {
        println!("{g:<18} {:>4} {:>4} {:>4}", c.tp, c.fp, c.fn_);
    }
    let fp_rate = flagged_benign as f64 / benign as f64;
    println!(
        "injection: recall {:.3}, precision {:.3}, false positives {}/{} = {:.3}",
        all.recall(),
        all.precision(),
        flagged_benign,
        benign,
        fp_rate
    );
    assert!(benign >= 100 && all.tp + all.fn_ >= 100);
    assert!(all.recall() >= 0.9, "recall {:.3}", all.recall());
    assert!(fp_rate <= 0.05, "false-positive rate {fp_rate:.3}");
}

/// Lines written after the rules were last changed and never used to tune them: their
/// numbers show what to expect on unseen text. The floor here is looser on purpose.
#[test]
fn held_out_injection_set_is_reported() {
    let lines = corpus("injection_heldout.jsonl");
    let threshold = Policy::default().injection_threshold;
    let detector = RuleDetector::new();
    let (mut c, mut benign, mut fp) = (Counts::default(), 0usize, 0usize);
    for line in &lines {
        let text = line["text"].as_str().unwrap();
        let v = detector.detect(text);
        let flagged = v.score >= threshold;
        if line["label"] == "injection" {
            if flagged {
                c.tp += 1;
            } else {
                c.fn_ += 1;
                println!("held-out MISSED ({:.2}): {text}", v.score);
            }
        } else {
            benign += 1;
            if flagged {
                fp += 1;
                println!(
                    "held-out FALSE POSITIVE ({:.2} {:?}): {text}",
                    v.score, v.rules
                );
            }
        }
    }
    println!(
        "held-out injection: recall {:.3} ({} of {}), false positives {fp}/{benign}",
        c.recall(),
        c.tp,
        c.tp + c.fn_
    );
    assert!(c.recall() >= 0.7, "held-out recall {:.3}", c.recall());
    assert!(fp * 10 <= benign, "held-out false positives {fp}/{benign}");
}
