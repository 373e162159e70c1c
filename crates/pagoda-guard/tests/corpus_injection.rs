//! Recall and false-positive rate of the injection detector on the committed, labelled
//! corpus (`testdata/guard/injection.jsonl`), at the default policy threshold.

mod common;

use std::collections::BTreeMap;

use common::{corpus, Counts};
use pagoda_guard::{BayesDetector, Combined, Detector, Policy, RuleDetector};

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

/// Recall and false positives of the rules on one labelled file, printed; returns
/// (recall, fp, benign).
fn measure(name: &str) -> (f64, usize, usize) {
    let (c, fp, benign) = measure_with(&RuleDetector::new(), name);
    (c.recall(), fp, benign)
}

/// Hits of `detector` on one labelled file, printed; returns (counts, fp, benign).
fn measure_with(detector: &dyn Detector, name: &str) -> (Counts, usize, usize) {
    let lines = corpus(name);
    let threshold = Policy::default().injection_threshold;
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
                println!("{name} MISSED ({:.2}): {text}", v.score);
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
        "{name}: recall {:.3} ({} of {}), false positives {fp}/{benign}",
        c.recall(),
        c.tp,
        c.tp + c.fn_
    );
    (c, fp, benign)
}

/// `injection_heldout.jsonl` was measured once untouched (recall 0.536) and then used for
/// one round of rule changes, so it is a regression set now.
#[test]
fn first_held_out_set_is_a_regression_set_now() {
    let (recall, fp, benign) = measure("injection_heldout.jsonl");
    assert!(recall >= 0.9, "recall {recall:.3}");
    assert!(fp * 10 <= benign, "false positives {fp}/{benign}");
}

/// `injection_heldout2.jsonl` was written after the last rule change and never used to tune
/// them: its numbers are what to expect on unseen text, and they are poor (first and only
/// measurement: recall 2 of 18, no false positive of 18). The rules catch phrasing families;
/// paraphrases get through. The floors are that measurement, to catch regressions only.
#[test]
fn second_held_out_set_is_reported() {
    let (recall, fp, benign) = measure("injection_heldout2.jsonl");
    assert!(recall >= 0.11, "recall {recall:.3}");
    assert!(fp * 5 <= benign, "false positives {fp}/{benign}");
}

/// `injection_heldout3.jsonl` was written later still. Rules widened after the second set
/// gained nothing on it and flagged 5 of its 18 benign lines, so they were dropped; this set
/// chose between those two rule sets. Measured: recall 5 of 18, no false positive. One of
/// its misses then showed a gap in a category the issue names (an element hidden with the
/// `hidden` attribute, addressed to the model), so `hidden.html_element` was added: 6 of 18,
/// still no false positive. Floors: that measurement, to catch regressions.
#[test]
fn third_held_out_set_is_reported() {
    let (recall, fp, benign) = measure("injection_heldout3.jsonl");
    assert!(recall >= 0.33, "recall {recall:.3}");
    assert!(fp == 0 && benign >= 15, "false positives {fp}/{benign}");
}

/// The texts the built-in classifier learns from (see `inject/bayes.rs`).
fn training_lines() -> Vec<(String, bool)> {
    [
        "injection.jsonl",
        "injection_handwritten.jsonl",
        "injection_heldout.jsonl",
    ]
    .iter()
    .flat_map(|name| corpus(name))
    .map(|l| {
        (
            l["text"].as_str().unwrap().to_string(),
            l["label"] == "injection",
        )
    })
    .collect()
}

/// Rules plus a classifier trained on everything but `held_out`.
fn combined_without(lines: &[(String, bool)], held_out: impl Fn(usize) -> bool) -> Combined {
    let model = BayesDetector::train(
        lines
            .iter()
            .enumerate()
            .filter(|(i, _)| !held_out(*i))
            .map(|(_, (t, y))| (t.as_str(), *y)),
    );
    Combined::new(vec![Box::new(RuleDetector::new()), Box::new(model)])
}

/// The combined detector judged on texts its classifier never saw: 5-fold cross-validation
/// over the training corpus (the rules were tuned on all of it, so this flatters them but not
/// the classifier).
#[test]
fn combined_detector_meets_the_floors_under_cross_validation() {
    let lines = training_lines();
    let threshold = Policy::default().injection_threshold;
    let (mut c, mut benign, mut fp) = (Counts::default(), 0usize, 0usize);
    for fold in 0..5 {
        let detector = combined_without(&lines, |i| i % 5 == fold);
        for (text, attack) in lines.iter().skip(fold).step_by(5) {
            let flagged = detector.detect(text).score >= threshold;
            match (*attack, flagged) {
                (true, true) => c.tp += 1,
                (true, false) => c.fn_ += 1,
                (false, f) => {
                    benign += 1;
                    fp += usize::from(f);
                }
            }
        }
    }
    let fp_rate = fp as f64 / benign as f64;
    println!(
        "combined, 5-fold: recall {:.3} ({} of {}), false positives {fp}/{benign} = {fp_rate:.3}",
        c.recall(),
        c.tp,
        c.tp + c.fn_
    );
    assert!(c.recall() >= 0.9, "recall {:.3}", c.recall());
    assert!(fp_rate <= 0.05, "false-positive rate {fp_rate:.3}");
}

/// Rules + the built-in classifier (`injection.classifier = true`) on the two sets the
/// classifier never learnt from (its threshold was chosen by cross-validation above; one rule
/// came after the third set, see above).
/// First measurement: recall 13/18 and 14/18, false positives 0/18 and 2/18 (rules alone:
/// 2/18 and 6/18, none); the floors are that measurement, to catch regressions.
#[test]
fn combined_detector_on_the_untouched_held_out_sets() {
    let detector = Combined::rules_and_classifier();
    let results: Vec<(usize, usize)> = ["injection_heldout2.jsonl", "injection_heldout3.jsonl"]
        .iter()
        .map(|name| {
            let (c, fp, _) = measure_with(&detector, name);
            (c.tp, fp)
        })
        .collect();
    assert!(results[0].0 >= 13 && results[0].1 == 0, "{results:?}");
    assert!(results[1].0 >= 14 && results[1].1 <= 2, "{results:?}");
}
