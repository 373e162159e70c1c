//! What a JSON file in the reports folder is: one of the reports Pagoda's tools save, read
//! with the tools' own types, or unreadable with the reason. Never a panic: the files come
//! from outside the server.

use pagoda_bench::goodput_profile::GoodputSearchReport;
use pagoda_bench::plan_report::PlanReport;
use pagoda_bench::profile_format::Profile;
use pagoda_bench::BenchReport;
use pagoda_redteam::SavedReport;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::html::num;

pub enum Saved {
    /// `pagoda bench serve`'s `bench.json`.
    Bench(BenchReport),
    /// `pagoda bench profile`'s profile JSON.
    Profile(Profile),
    /// `pagoda bench profile --slo-*`'s `goodput_search.json`.
    Goodput(GoodputSearchReport),
    /// `pagoda plan --out`.
    Plan(PlanReport),
    /// `pagoda redteam --out`.
    Redteam(SavedReport),
}

impl Saved {
    pub fn label(&self) -> &'static str {
        match self {
            Saved::Bench(_) => "bench serve",
            Saved::Profile(_) => "bench profile",
            Saved::Goodput(_) => "goodput search",
            Saved::Plan(_) => "plan",
            Saved::Redteam(_) => "red team",
        }
    }
}

/// One line for the list of reports.
pub fn summary(saved: &Saved) -> String {
    match saved {
        Saved::Bench(r) => {
            let best = r
                .runs
                .iter()
                .map(|run| run.output_token_throughput)
                .fold(0.0, f64::max);
            format!(
                "{}: {} load level(s), up to {} output tok/s",
                r.model,
                r.runs.len(),
                num(best, 1)
            )
        }
        Saved::Profile(p) => format!(
            "{}: prefill {} tok/s, decode {} tok/s, {} load(s)",
            p.model,
            num(p.prefill_tps, 1),
            num(p.decode_tps, 1),
            p.loads.len()
        ),
        Saved::Goodput(g) => format!(
            "{}: {} req/s meet the SLO ({} rates measured)",
            g.model,
            num(g.answer.max_rate, 2),
            g.points.len()
        ),
        Saved::Plan(p) => format!(
            "{} req/s: {} accelerators disaggregated, {} colocated",
            p.qps.normalize(),
            p.plan
                .prefill
                .accelerators
                .saturating_add(p.plan.decode.accelerators),
            p.plan.colocated.accelerators
        ),
        Saved::Redteam(r) => format!(
            "{} against {}: attack success rate {}",
            r.pack,
            r.report.target,
            num(r.report.asr, 2)
        ),
    }
}

fn typed<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| format!("not a valid {what} report: {e}"))
}

/// Tells the reports apart by the fields only each of them has, then reads the whole file
/// with that tool's type, so a file that is cut short or edited by hand shows why.
pub fn parse(bytes: &[u8]) -> Result<Saved, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let has = |key: &str| value.get(key).is_some();
    if has("runs") {
        typed(value, "bench serve").map(Saved::Bench)
    } else if has("points") && has("answer") {
        typed(value, "goodput search").map(Saved::Goodput)
    } else if has("prefill_tps") && has("loads") {
        typed(value, "bench profile").map(Saved::Profile)
    } else if has("plan") {
        typed(value, "plan").map(Saved::Plan)
    } else if has("pack") && has("probes") {
        typed(value, "red team").map(Saved::Redteam)
    } else {
        Err("not a report of pagoda bench, plan or redteam".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anything_else_is_unreadable_with_a_reason() {
        let cases: [(&[u8], &str); 7] = [
            (b"{\"runs\": [1", "not JSON"),
            (b"\xff\xfe", "not JSON"),
            (b"[]", "not a report"),
            (b"{\"runs\": \"x\"}", "not a valid bench serve report"),
            (b"{\"plan\": {}}", "not a valid plan report"),
            (
                b"{\"pack\": 1, \"probes\": []}",
                "not a valid red team report",
            ),
            (&[b'['; 100_000], "not JSON"),
        ];
        for (bytes, reason) in cases {
            match parse(bytes) {
                Err(e) => assert!(e.contains(reason), "{e}"),
                Ok(saved) => panic!("read as {}", saved.label()),
            }
        }
    }
}
