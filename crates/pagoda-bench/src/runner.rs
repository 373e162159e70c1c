//! Drives one load level: sends conversations at the configured load until the request
//! count or the duration is reached, and records every request, failed or not.

use crate::arrivals::{Load, PoissonGaps};
use crate::client::{StreamedResponse, StreamingClient};
use crate::record::{RequestRecord, Success, TokenSource};
use crate::token_count::TokenCounter;
use crate::workload::{approximate_tokens, Conversation, Message, Role, Workload};
use indicatif::ProgressBar;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// When a run stops sending.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StopAfter {
    Requests(u64),
    /// Sending stops at this time; requests already in flight still complete and count.
    Duration(Duration),
}

#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    pub load: Load,
    pub stop: StopAfter,
    /// With Poisson arrivals, the most requests in flight at once (`None`: unbounded).
    pub max_concurrency: Option<u32>,
    pub seed: u64,
}

/// Everything a run measured.
pub struct RunRecords {
    pub records: Vec<RequestRecord>,
    /// From the first send to the last response's end.
    pub wall: Duration,
}

impl RunRecords {
    /// Leaves out the first `n` requests sent; the wall time then starts at the first send
    /// that is kept and still ends at the last response's end.
    pub fn without_first(mut self, n: u64) -> RunRecords {
        if n == 0 {
            return self;
        }
        let first_send = self.records.first().map_or(Duration::ZERO, |r| r.sent_at);
        let end = first_send + self.wall;
        let n = usize::try_from(n)
            .unwrap_or(usize::MAX)
            .min(self.records.len());
        self.records.drain(..n);
        let kept_first_send = self.records.first().map_or(end, |r| r.sent_at);
        RunRecords {
            records: self.records,
            wall: end.saturating_sub(kept_first_send),
        }
    }
}

/// What all requests of a run share.
pub struct RunContext {
    pub client: StreamingClient,
    pub workload: Mutex<Box<dyn Workload>>,
    pub tokenizer: Option<TokenCounter>,
}

/// Issues request tickets so that exactly the requested number is sent across all tasks.
struct Tickets {
    issued: AtomicU64,
    stop: StopAfter,
    start: Instant,
}

impl Tickets {
    fn take(&self) -> bool {
        match self.stop {
            StopAfter::Requests(limit) => self.issued.fetch_add(1, Ordering::Relaxed) < limit,
            StopAfter::Duration(limit) => self.start.elapsed() < limit,
        }
    }

    fn exhausted(&self) -> bool {
        match self.stop {
            StopAfter::Requests(limit) => self.issued.load(Ordering::Relaxed) >= limit,
            StopAfter::Duration(limit) => self.start.elapsed() >= limit,
        }
    }
}

/// Runs `spec` against the server; progress is reported per finished request.
pub async fn run(
    context: Arc<RunContext>,
    spec: RunSpec,
    progress: Option<ProgressBar>,
) -> RunRecords {
    let start = Instant::now();
    let tickets = Arc::new(Tickets {
        issued: AtomicU64::new(0),
        stop: spec.stop,
        start,
    });
    let mut tasks = JoinSet::new();
    match spec.load {
        Load::Concurrency(workers) => {
            for _ in 0..workers.max(1) {
                let (context, tickets, progress) =
                    (context.clone(), tickets.clone(), progress.clone());
                tasks.spawn(async move {
                    let mut records = Vec::new();
                    while !tickets.exhausted() {
                        let conversation = next_conversation(&context);
                        let more = run_conversation(
                            &context,
                            conversation,
                            &tickets,
                            None,
                            &progress,
                            &mut records,
                        )
                        .await;
                        if !more {
                            break;
                        }
                    }
                    records
                });
            }
        }
        Load::PoissonRate(rate) => {
            let limit = spec
                .max_concurrency
                .map(|n| Arc::new(Semaphore::new(n as usize)));
            let mut next_send = start;
            let mut planned = 0u64;
            for gap in PoissonGaps::new(rate, spec.seed) {
                next_send += gap;
                tokio::time::sleep_until(next_send.into()).await;
                if tickets.exhausted() || planned_enough(spec.stop, planned) {
                    break;
                }
                let conversation = next_conversation(&context);
                planned += conversation.turns.len() as u64;
                let (context, tickets, progress, limit) = (
                    context.clone(),
                    tickets.clone(),
                    progress.clone(),
                    limit.clone(),
                );
                tasks.spawn(async move {
                    let mut records = Vec::new();
                    run_conversation(
                        &context,
                        conversation,
                        &tickets,
                        limit.as_deref(),
                        &progress,
                        &mut records,
                    )
                    .await;
                    records
                });
            }
        }
    }
    let mut records = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        // A panicking task would be a bug in this crate; surface it rather than hide it.
        records.extend(joined.expect("benchmark task panicked"));
    }
    let wall = start.elapsed();
    records.sort_by_key(|r| r.sent_at);
    let first_send = records.first().map_or(Duration::ZERO, |r| r.sent_at);
    RunRecords {
        records,
        wall: wall.saturating_sub(first_send),
    }
}

fn planned_enough(stop: StopAfter, planned: u64) -> bool {
    matches!(stop, StopAfter::Requests(limit) if planned >= limit)
}

fn next_conversation(context: &RunContext) -> Conversation {
    // The lock is held only to draw the next seeded conversation.
    context
        .workload
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .next_conversation()
}

/// Sends a conversation's turns in order, each with the full history so far including the
/// replies received. Returns `false` once no more requests may be sent.
async fn run_conversation(
    context: &RunContext,
    conversation: Conversation,
    tickets: &Tickets,
    limit: Option<&Semaphore>,
    progress: &Option<ProgressBar>,
    records: &mut Vec<RequestRecord>,
) -> bool {
    let mut history: Vec<Message> = Vec::new();
    for turn in conversation.turns {
        if !tickets.take() {
            return false;
        }
        let _permit = match limit {
            Some(semaphore) => semaphore.acquire().await.ok(),
            None => None,
        };
        history.extend(turn.new_messages);
        let sent_at = tickets.start.elapsed();
        let outcome = context.client.stream(&history, turn.max_tokens).await;
        let reply = outcome.as_ref().map(|r| r.text.clone()).unwrap_or_default();
        let outcome = outcome.map(|response| measure(context, &history, response));
        let failed = outcome.is_err();
        records.push(RequestRecord { sent_at, outcome });
        if let Some(bar) = progress {
            bar.inc(1);
        }
        if failed {
            // Later turns would resend a history the server never answered.
            return true;
        }
        history.push(Message::new(Role::Assistant, reply));
    }
    true
}

/// Token counts: the server's usage if given, else the tokenizer, else an estimate.
fn measure(context: &RunContext, history: &[Message], response: StreamedResponse) -> Success {
    let usage = response.usage;
    let (input_tokens, input_source) = match usage.and_then(|u| u.prompt_tokens) {
        Some(n) => (n, TokenSource::Usage),
        None => {
            let text: String = history.iter().map(|m| m.content.as_str()).collect();
            match &context.tokenizer {
                Some(t) => (t.count(&text) as u64, TokenSource::Tokenizer),
                None => (u64::from(approximate_tokens(&text)), TokenSource::Estimate),
            }
        }
    };
    let chunks = response.chunk_times.len() as u64;
    let (output_tokens, output_source) = match usage.and_then(|u| u.completion_tokens) {
        Some(n) => (n, TokenSource::Usage),
        None => match &context.tokenizer {
            Some(t) => match t.count(&response.text) as u64 {
                0 => (chunks, TokenSource::Estimate),
                n => (n, TokenSource::Tokenizer),
            },
            None => (chunks, TokenSource::Estimate),
        },
    };
    let ttft = response.chunk_times[0];
    let inter_token = response
        .chunk_times
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .collect();
    Success {
        ttft,
        inter_token,
        e2e: response.e2e,
        input_tokens,
        input_source,
        output_tokens,
        output_source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Failure, FailureKind};

    fn sent_at(ms: &[u64]) -> RunRecords {
        let records = ms
            .iter()
            .map(|&m| RequestRecord {
                sent_at: Duration::from_millis(m),
                outcome: Err(Failure {
                    kind: FailureKind::Connect,
                    message: String::new(),
                }),
            })
            .collect();
        // First send at 10 ms, last response ends at 110 ms.
        RunRecords {
            records,
            wall: Duration::from_millis(100),
        }
    }

    #[test]
    fn without_first_drops_the_earliest_sends_and_shortens_the_wall() {
        let kept = sent_at(&[10, 20, 40, 70]).without_first(2);
        let kept_sends: Vec<_> = kept.records.iter().map(|r| r.sent_at).collect();
        assert_eq!(
            kept_sends,
            vec![Duration::from_millis(40), Duration::from_millis(70)]
        );
        assert_eq!(kept.wall, Duration::from_millis(70));
    }

    #[test]
    fn without_first_zero_or_too_many() {
        assert_eq!(sent_at(&[10, 20]).without_first(0).records.len(), 2);
        let none = sent_at(&[10, 20]).without_first(5);
        assert!(none.records.is_empty());
        assert_eq!(none.wall, Duration::ZERO);
    }
}
