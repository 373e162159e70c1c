//! One admitted request's meter. It holds the reservation, counts tokens as they stream,
//! and turns into exactly one CostEvent: at `commit` when every choice has finished (the
//! caller awaits durability before sending the last bytes), or on drop when the request
//! was aborted, failed or never ran. Either way the reservation is settled once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::bill::{bill, ChoiceTally, Ended, PromptShape};
use crate::clock::now_ms;
use crate::event::CostEvent;
use crate::gateway::Caller;
use crate::ids::{EventId, RequestId};
use crate::limits::Reservation;
use crate::policy::TenantPolicy;
use crate::pricing::ModelPrice;
use crate::settlement::Settlement;

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

struct Progress {
    prompts: Vec<PromptShape>,
    choices: Vec<ChoiceTally>,
    submitted: bool,
    first_token: Option<Duration>,
}

/// What a ticket is for: the request, its caller and model, what it reserved under which
/// policy, and its price.
pub(crate) struct TicketTerms {
    pub request_id: RequestId,
    pub caller: Caller,
    pub model: String,
    pub reservation: Reservation,
    pub policy: TenantPolicy,
    pub price: ModelPrice,
    pub currency: String,
}

pub struct Ticket {
    settlement: Arc<Settlement>,
    terms: TicketTerms,
    started: Instant,
    progress: Mutex<Progress>,
    closed: AtomicBool,
}

impl Ticket {
    /// `prompts`: each prompt's (tokens, choices).
    pub(crate) fn new(
        settlement: Arc<Settlement>,
        terms: TicketTerms,
        prompts: &[(usize, usize)],
    ) -> Ticket {
        let mut shapes = Vec::with_capacity(prompts.len());
        let mut total = 0;
        for &(tokens, n) in prompts {
            shapes.push(PromptShape {
                prompt_tokens: tokens as u64,
                first_choice: total,
            });
            total += n.max(1);
        }
        Ticket {
            settlement,
            terms,
            started: Instant::now(),
            progress: Mutex::new(Progress {
                prompts: shapes,
                choices: vec![ChoiceTally::default(); total],
                submitted: false,
                first_token: None,
            }),
            closed: AtomicBool::new(false),
        }
    }

    pub fn request_id(&self) -> &RequestId {
        &self.terms.request_id
    }

    pub fn caller(&self) -> &Caller {
        &self.terms.caller
    }

    fn progress(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The request reached the engine; from now on an early end is an abort, not a refusal.
    pub fn submitted(&self) {
        self.progress().submitted = true;
    }

    /// The tally of choice `choice` of prompt `prompt`, if there is one.
    fn choice(p: &mut Progress, prompt: usize, choice: usize) -> Option<&mut ChoiceTally> {
        let first = p.prompts.get(prompt)?.first_choice;
        p.choices.get_mut(first + choice)
    }

    /// Tokens streamed for one choice, and the prompt tokens the engine found cached for it
    /// when it knows them.
    pub fn on_tokens(&self, prompt: usize, choice: usize, tokens: usize, cached: Option<usize>) {
        let elapsed = self.started.elapsed();
        let mut p = self.progress();
        if tokens > 0 {
            p.first_token.get_or_insert(elapsed);
        }
        if let Some(c) = Ticket::choice(&mut p, prompt, choice) {
            c.streamed += tokens as u64;
            c.cached = c.cached.or(cached.map(|n| n as u64));
        }
    }

    /// The engine's own token counts for a prompt's choices, taken when its stream is
    /// dropped: a caller that stops reading is billed for what was generated, not for what
    /// it pulled.
    pub fn on_generated(&self, prompt: usize, generated: &[u64]) {
        let mut p = self.progress();
        for (i, &n) in generated.iter().enumerate() {
            if let Some(c) = Ticket::choice(&mut p, prompt, i) {
                c.generated = c.generated.max(n);
            }
        }
    }

    /// Records a finished choice; `true` once every choice of the request has finished.
    pub fn on_finished(&self, prompt: usize, choice: usize, end: ChoiceEnd<'_>) -> bool {
        let mut p = self.progress();
        if let Some(c) = Ticket::choice(&mut p, prompt, choice) {
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
        p.choices.iter().all(|c| c.end.is_some())
    }

    /// Settles and records the event, resolving once the event is durable. Later calls (and
    /// the drop) do nothing. Nothing is lost if this future is dropped midway: the event is
    /// queued and the settlement started before the first await.
    pub async fn commit(&self) {
        let Some((event, used)) = self.close() else {
            return;
        };
        let settling = self.settle(used, &event);
        let (tx, rx) = oneshot::channel();
        self.settlement.record(event, Some(tx));
        if let Some(task) = settling {
            // Waited for, so the caller's next request sees its slot and tokens back.
            let _ = task.await;
        }
        if rx.await.is_err() {
            tracing::error!(request_id = %self.terms.request_id, "a cost event is not durable yet; it stays queued");
        }
    }

    fn settle(&self, used: u64, event: &CostEvent) -> Option<tokio::task::JoinHandle<()>> {
        let t = &self.terms;
        self.settlement
            .settle(&t.policy, &t.reservation, used, event.cost, &t.currency)
    }

    /// Builds the event once; `None` if it was already built.
    fn close(&self) -> Option<(CostEvent, u64)> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return None;
        }
        let p = self.progress();
        let t = &self.terms;
        let b = bill(&p.prompts, &p.choices, p.submitted, p.first_token, &t.price);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let event = CostEvent {
            event_id: EventId::random(),
            request_id: t.request_id.clone(),
            tenant: t.caller.tenant.clone(),
            key_id: t.caller.key_id.clone(),
            model: t.model.clone(),
            prompt_tokens: b.usage.prompt,
            cached_tokens: b.usage.cached,
            completion_tokens: b.usage.completion,
            compute_ms: ms(b.compute),
            queue_ms: ms(b.queued),
            ttft_ms: b.first_token.map(ms),
            e2e_ms: ms(self.started.elapsed()),
            status: b.status,
            finish_reason: b.finish_reason,
            cost: b.cost,
            currency: t.currency.clone(),
            ts_ms: now_ms(),
        };
        Some((event, b.usage.prompt + b.usage.completion))
    }
}

impl Drop for Ticket {
    /// Aborted, failed before the end, or refused after admission: record what was used
    /// without waiting (there is no one left to wait for it).
    fn drop(&mut self) {
        let Some((event, used)) = self.close() else {
            return;
        };
        let _ = self.settle(used, &event);
        self.settlement.record(event, None);
    }
}
