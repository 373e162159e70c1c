//! Running probes against a target.

use serde_json::{json, Value};

use crate::client::{Client, Outcome};
use crate::detect::Judge;
use crate::error::RedteamError;
use crate::probe::Probe;
use crate::report::{rate, ProbeResult, Report};

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub target: String,
    pub api_key: Option<String>,
    pub model: Option<String>,
    pub repeats: usize,
    pub max_tokens: u32,
}

/// How one attempt ended.
enum Attempt {
    Judged { success: bool, fired: Vec<String> },
    Blocked,
    Failed,
}

pub async fn run(config: &RunConfig, probes: &[Probe]) -> Result<Report, RedteamError> {
    if config.repeats == 0 {
        return Err(RedteamError::Repeats);
    }
    let mut client = Client::new(
        &config.target,
        config.api_key.clone(),
        config.model.clone(),
        config.max_tokens,
    )?;
    client.resolve_model().await?;
    let judge = Judge::new();
    let mut report = Report {
        target: config.target.clone(),
        ..Report::default()
    };
    for probe in probes {
        let mut r = ProbeResult {
            id: probe.id.clone(),
            category: probe.category.clone(),
            ..ProbeResult::default()
        };
        for attempt in 0..config.repeats {
            r.attempts += 1;
            match run_once(&client, &judge, probe, attempt).await {
                Attempt::Judged { success, fired } => {
                    r.successes += usize::from(success);
                    for f in fired {
                        if !r.fired.contains(&f) {
                            r.fired.push(f);
                        }
                    }
                }
                Attempt::Blocked => r.blocked += 1,
                Attempt::Failed => r.errors += 1,
            }
        }
        r.asr = rate(r.successes, r.attempts, r.errors);
        report.attempts += r.attempts;
        report.successes += r.successes;
        report.blocked += r.blocked;
        report.errors += r.errors;
        report.probes.push(r);
    }
    if report.errors == report.attempts {
        return Err(RedteamError::Unreachable {
            url: config.target.clone(),
            reason: "every attempt failed (see the target's logs)".into(),
        });
    }
    report.asr = rate(report.successes, report.attempts, report.errors);
    Ok(report)
}

/// A fresh canary per attempt, so one leak cannot be mistaken for another.
fn canary(probe: &Probe, attempt: usize) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in probe.id.bytes().chain(attempt.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "RT-CANARY-{:012x}",
        (h ^ u64::from(nanos)) & 0xffff_ffff_ffff
    )
}

/// Sends the turns in order; a request goes out after each turn that ends a run of
/// non-user turns (so a tool result and the question after it travel together).
async fn run_once(client: &Client, judge: &Judge, probe: &Probe, attempt: usize) -> Attempt {
    let canary = canary(probe, attempt);
    let mut messages: Vec<Value> = Vec::new();
    if let Some(system) = &probe.system {
        messages.push(json!({"role": "system", "content": system.replace("{canary}", &canary)}));
    }
    let mut replies = Vec::new();
    for (i, turn) in probe.turns.iter().enumerate() {
        messages.push(turn.message(&canary));
        let last = i + 1 == probe.turns.len();
        if !last && probe.turns[i + 1].role() != "user" {
            continue;
        }
        match client.chat(&messages, &probe.tools).await {
            Outcome::Reply(reply) => {
                messages.push(json!({"role": "assistant", "content": reply.text}));
                replies.push(reply);
            }
            Outcome::Blocked(_) => return Attempt::Blocked,
            Outcome::Failed(_) => return Attempt::Failed,
        }
    }
    let (success, fired) = judge.judge(&probe.detectors, &replies, &canary);
    Attempt::Judged { success, fired }
}

/// `run` on a runtime of its own, for callers that are not async.
pub fn run_blocking(config: &RunConfig, probes: &[Probe]) -> Result<Report, RedteamError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(run(config, probes))
}
