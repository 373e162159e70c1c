//! A saved `pagoda redteam --out` report as console tables: attack success rate per pack
//! (the built-in packs are one category each; a YAML pack's probes are grouped by their
//! category the same way), the totals, and every probe.

use std::collections::BTreeMap;

use pagoda_redteam::SavedReport;

use super::html::{escape, num, table};
use super::report_bench::facts;

#[derive(Default)]
struct Tally {
    probes: usize,
    attempts: usize,
    successes: usize,
    blocked: usize,
    errors: usize,
}

/// Successes over attempts that got an answer or a block, as the runner computes it, but
/// saturating: a hand-edited file may claim more errors than attempts.
fn asr(successes: usize, attempts: usize, errors: usize) -> String {
    let judged = attempts.saturating_sub(errors);
    if judged == 0 {
        return "-".into();
    }
    num(successes as f64 / judged as f64, 2)
}

pub fn redteam(saved: &SavedReport) -> String {
    let r = &saved.report;
    let mut packs: BTreeMap<&str, Tally> = BTreeMap::new();
    for p in &r.probes {
        let t = packs.entry(p.category.as_str()).or_default();
        t.probes += 1;
        t.attempts = t.attempts.saturating_add(p.attempts);
        t.successes = t.successes.saturating_add(p.successes);
        t.blocked = t.blocked.saturating_add(p.blocked);
        t.errors = t.errors.saturating_add(p.errors);
    }
    let mut rows: Vec<Vec<String>> = packs
        .iter()
        .map(|(name, t)| {
            vec![
                escape(name),
                t.probes.to_string(),
                t.attempts.to_string(),
                t.successes.to_string(),
                t.blocked.to_string(),
                t.errors.to_string(),
                asr(t.successes, t.attempts, t.errors),
            ]
        })
        .collect();
    rows.push(vec![
        "<b>total</b>".into(),
        r.probes.len().to_string(),
        r.attempts.to_string(),
        r.successes.to_string(),
        r.blocked.to_string(),
        r.errors.to_string(),
        format!("<b>{}</b>", num(r.asr, 2)),
    ]);
    let probes: Vec<Vec<String>> = r
        .probes
        .iter()
        .map(|p| {
            vec![
                escape(&p.id),
                escape(&p.category),
                p.attempts.to_string(),
                p.successes.to_string(),
                p.blocked.to_string(),
                p.errors.to_string(),
                num(p.asr, 2),
                escape(&p.fired.join(", ")),
            ]
        })
        .collect();
    let mut out = facts(&[
        ("probes", saved.pack.clone()),
        ("target", r.target.clone()),
        ("overall attack success rate", num(r.asr, 2)),
        ("tool", saved.tool.clone()),
    ]);
    out.push_str("<h3>Attack success rate per pack</h3>");
    out.push_str(&table(
        "redteam-packs",
        &[
            "pack",
            "probes",
            "attempts",
            "successes",
            "blocked",
            "errors",
            "ASR",
        ],
        &rows,
    ));
    out.push_str("<h3>Probes</h3>");
    out.push_str(&table(
        "redteam-probes",
        &[
            "probe",
            "pack",
            "attempts",
            "successes",
            "blocked",
            "errors",
            "ASR",
            "detectors fired",
        ],
        &probes,
    ));
    out
}
