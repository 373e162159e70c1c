//! One admitted request's meter. It holds the reservation, counts tokens as they stream,
//! and turns into exactly one CostEvent: at `commit` when every choice has finished (the
//! caller awaits durability before sending the last bytes), or on drop when the request
//! was aborted, failed or never ran. Either way the reservation is settled once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use tokio::sync::oneshot;

use crate::clock::now_ms;
use crate::event::{CostEvent, Status};
use crate::gateway::{Caller, Gateway};
use crate::ids::{EventId, RequestId};
use crate::limits::{Limiter, Reservation};
use crate::policy::TenantPolicy;
use crate::pricing::{ModelPrice, TokenUsage};

/// How one choice ended, as the engine reported it.
#[derive(Debug, Clone, Copy)]
pub struct ChoiceEnd<'a> {
    pub prompt_tokens: usize,
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    pub queued: Duration,
    pub first_token: Option<Duration>,
    pub compute: Duration,
    pub finish_reason: &'a str,
    pub failed: bool,
}

#[derive(Debug, Default, Clone)]
struct Choice {
    streamed: u64,
    /// What the engine generated, read or not (known when the stream is dropped early).
    generated: u64,
    /// Prompt tokens the engine found cached, once it says (before the choice ends).
    cached: Option<u64>,
    end: Option<Ended>,
}

#[derive(Debug, Clone)]
struct Ended {
    prompt: u64,
    cached: u64,
    completion: u64,
    queued: Duration,
    first_token: Option<Duration>,
    compute: Duration,
    finish_reason: String,
    failed: bool,
}

struct Progress {
    /// Index of each prompt's first choice in `choices`.
    offsets: Vec<usize>,
    prompt_tokens: Vec<usize>,
    choices: Vec<Choice>,
    submitted: bool,
    first_token: Option<Duration>,
}

pub struct Ticket {
    gateway: Arc<Gateway>,
    caller: Caller,
    model: String,
    request_id: RequestId,
    reservation: Reservation,
    policy: TenantPolicy,
    price: ModelPrice,
    currency: String,
    started: Instant,
    progress: Mutex<Progress>,
    closed: AtomicBool,
}

impl Ticket {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        gateway: Arc<Gateway>,
        request_id: RequestId,
        caller: Caller,
        model: String,
        reservation: Reservation,
        policy: TenantPolicy,
        price: ModelPrice,
        currency: String,
        prompts: &[(usize, usize)],
    ) -> Ticket {
        let mut offsets = Vec::with_capacity(prompts.len());
        let mut total = 0;
        for &(_, n) in prompts {
            offsets.push(total);
            total += n.max(1);
        }
        Ticket {
            gateway,
            caller,
            model,
            request_id,
            reservation,
            policy,
            price,
            currency,
            started: Instant::now(),
            progress: Mutex::new(Progress {
                offsets,
                prompt_tokens: prompts.iter().map(|p| p.0).collect(),
                choices: vec![Choice::default(); total],
                submitted: false,
                first_token: None,
            }),
            closed: AtomicBool::new(false),
        }
    }

    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The request reached the engine; from now on an early end is an abort, not a refusal.
    pub fn submitted(&self) {
        self.progress().submitted = true;
    }

    /// Tokens streamed for one choice, and the prompt tokens the engine found cached for it
    /// when it knows them.
    pub fn on_tokens(&self, prompt: usize, choice: usize, tokens: usize, cached: Option<usize>) {
        let elapsed = self.started.elapsed();
        let mut p = self.progress();
        if tokens > 0 {
            p.first_token.get_or_insert(elapsed);
        }
        if let Some(i) = p.offsets.get(prompt).map(|o| o + choice) {
            if let Some(c) = p.choices.get_mut(i) {
                c.streamed += tokens as u64;
                c.cached = c.cached.or(cached.map(|n| n as u64));
            }
        }
    }

    /// The engine's own token counts for a prompt's choices, taken when its stream is
    /// dropped: a caller that stops reading is billed for what was generated, not for what
    /// it pulled.
    pub fn on_generated(&self, prompt: usize, generated: &[u64]) {
        let mut p = self.progress();
        let Some(&offset) = p.offsets.get(prompt) else {
            return;
        };
        for (i, &n) in generated.iter().enumerate() {
            if let Some(c) = p.choices.get_mut(offset + i) {
                c.generated = c.generated.max(n);
            }
        }
    }

    /// Records a finished choice; `true` once every choice of the request has finished.
    pub fn on_finished(&self, prompt: usize, choice: usize, end: ChoiceEnd<'_>) -> bool {
        let mut p = self.progress();
        if let Some(i) = p.offsets.get(prompt).map(|o| o + choice) {
            if let Some(c) = p.choices.get_mut(i) {
                c.end = Some(Ended {
                    prompt: end.prompt_tokens as u64,
                    cached: end.cached_tokens as u64,
                    completion: end.completion_tokens as u64,
                    queued: end.queued,
                    first_token: end.first_token,
                    compute: end.compute,
                    finish_reason: end.finish_reason.to_string(),
                    failed: end.failed,
                });
            }
        }
        p.choices.iter().all(|c| c.end.is_some())
    }

    /// Settles and records the event, resolving once the event is durable. Later calls (and
    /// the drop) do nothing. Nothing is lost if this future is dropped midway: the event is
    /// queued and the settlement started before the first await.
    pub async fn commit(&self) {
        let Some((event, used)) = self.close() else {
            return;
        };
        let settling = self.settle(used, event.cost);
        self.gateway.stats.observe(&event);
        let (tx, rx) = oneshot::channel();
        self.gateway.sink.record(event, Some(tx));
        if let Some(task) = settling {
            // Waited for, so the caller's next request sees its slot and tokens back.
            let _ = task.await;
        }
        if rx.await.is_err() {
            tracing::error!(request_id = %self.request_id, "a cost event could not be made durable");
        }
    }

    /// Replaces the reservation by what was used. In process this is done at once; with
    /// Redis it runs as a task of its own, which finishes even if its waiter goes away.
    fn settle(&self, used: u64, cost: Decimal) -> Option<tokio::task::JoinHandle<()>> {
        let gw = &self.gateway;
        match &gw.limiter {
            Limiter::Local(l) => {
                let spend = l.settle(&self.policy, &self.reservation, used, cost, now_ms());
                gw.alerts
                    .check(&self.policy, &self.reservation, spend, &self.currency);
                None
            }
            Limiter::Redis(_) => {
                let Ok(handle) = tokio::runtime::Handle::try_current() else {
                    tracing::error!("no runtime to settle a reservation in Redis");
                    return None;
                };
                let (gw, policy, reservation) =
                    (gw.clone(), self.policy.clone(), self.reservation.clone());
                let currency = self.currency.clone();
                Some(handle.spawn(async move {
                    match gw.limiter.settle(&policy, &reservation, used, cost, now_ms()).await {
                        Ok(spend) => gw.alerts.check(&policy, &reservation, spend, &currency),
                        Err(e) => {
                            tracing::error!(error = %e, tenant = %reservation.tenant, "settling a reservation failed")
                        }
                    }
                }))
            }
        }
    }

    /// Builds the event once; `None` if it was already built.
    fn close(&self) -> Option<(CostEvent, u64)> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return None;
        }
        let p = self.progress();
        let all_finished = p.choices.iter().all(|c| c.end.is_some());
        let failed = p
            .choices
            .iter()
            .any(|c| c.end.as_ref().is_some_and(|e| e.failed));
        let status = if failed {
            Status::Failed
        } else if all_finished {
            Status::Completed
        } else if p.submitted {
            Status::Aborted
        } else {
            Status::Rejected
        };
        let mut usage = TokenUsage::default();
        if status != Status::Rejected {
            for (prompt, &offset) in p.offsets.iter().enumerate() {
                // The prompt is billed once per prompt (its choices share it), from the
                // engine's figures if its first choice finished, else in full, cached as far
                // as the engine said before the abort (uncached if it never ran).
                let first = &p.choices[offset];
                let prompt_tokens = p.prompt_tokens[prompt] as u64;
                match &first.end {
                    Some(end) => {
                        usage.prompt += end.prompt;
                        usage.cached += end.cached;
                    }
                    None => {
                        usage.prompt += prompt_tokens;
                        usage.cached += first.cached.unwrap_or(0).min(prompt_tokens);
                    }
                }
            }
            for c in &p.choices {
                let unfinished = c.streamed.max(c.generated);
                usage.completion += c.end.as_ref().map_or(unfinished, |e| e.completion);
            }
        }
        let ends = || p.choices.iter().filter_map(|c| c.end.as_ref());
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let queued = ends().map(|e| e.queued).max().unwrap_or_default();
        let first = ends().filter_map(|e| e.first_token).min().or(p.first_token);
        let compute: Duration = ends().map(|e| e.compute).sum();
        let finish_reason = match status {
            Status::Aborted => Some("abort".to_string()),
            Status::Rejected => None,
            _ => ends().next().map(|e| e.finish_reason.clone()),
        };
        let cost = if status == Status::Rejected {
            Decimal::ZERO
        } else {
            self.price.cost(usage)
        };
        let event = CostEvent {
            event_id: EventId::random(),
            request_id: self.request_id.clone(),
            tenant: self.caller.tenant.clone(),
            key_id: self.caller.key_id.clone(),
            model: self.model.clone(),
            prompt_tokens: usage.prompt,
            cached_tokens: usage.cached,
            completion_tokens: usage.completion,
            compute_ms: ms(compute),
            queue_ms: ms(queued),
            ttft_ms: first.map(ms),
            e2e_ms: ms(self.started.elapsed()),
            status,
            finish_reason,
            cost,
            currency: self.currency.clone(),
            ts_ms: now_ms(),
        };
        Some((event, usage.prompt + usage.completion))
    }
}

impl Drop for Ticket {
    /// Aborted, failed before the end, or refused after admission: record what was used
    /// without waiting (there is no one left to wait for it).
    fn drop(&mut self) {
        let Some((event, used)) = self.close() else {
            return;
        };
        let _ = self.settle(used, event.cost);
        self.gateway.stats.observe(&event);
        self.gateway.sink.record(event, None);
    }
}
