//! One engine step, synchronously: schedule -> forward -> sample -> update -> stream out.
//! Owns all engine state; the thread in `handle.rs` drives it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pagoda_engine::{
    FinishReason, FinishedRequest, NewRequest, RequestId, SampledToken, Sampler, ScheduledBatch,
    Scheduler, StopStringMatcher, StopStringSet,
};
use pagoda_models::{ForwardBatch, LogitsWanted, ModelRunner};
use pagoda_text::{IncrementalDetokenizer, Tokenizer};
use tokio::sync::mpsc::UnboundedSender;

use crate::error::Result;
use crate::request::{Completion, GenerateRequest, RequestOutput, Timings, TokenLogprob, Usage};
use crate::stats::EngineStats;

/// Per-choice state that lives outside the scheduler: where its output goes and the text side.
struct ActiveRequest {
    index: usize,
    sender: UnboundedSender<RequestOutput>,
    detokenizer: IncrementalDetokenizer,
    stops: StopStringMatcher,
    submitted: Instant,
    first_scheduled: Option<Instant>,
    /// From the first admission, as the scheduler reports it at the end.
    cached_tokens: Option<usize>,
    first_token: Option<Instant>,
    compute: Duration,
    wants_logprobs: bool,
}

pub struct EngineCore {
    scheduler: Scheduler,
    sampler: Sampler,
    runner: ModelRunner,
    tokenizer: Arc<Tokenizer>,
    active: HashMap<RequestId, ActiveRequest>,
    stats: EngineStats,
    /// The last step found nothing it could schedule.
    idle: bool,
}

impl EngineCore {
    pub fn new(scheduler: Scheduler, runner: ModelRunner, tokenizer: Arc<Tokenizer>) -> Self {
        let mut core = EngineCore {
            scheduler,
            sampler: Sampler::new(),
            runner,
            tokenizer,
            active: HashMap::new(),
            stats: EngineStats::default(),
            idle: false,
        };
        core.refresh_stats();
        core
    }

    pub fn has_work(&self) -> bool {
        self.scheduler.has_unfinished_requests()
    }

    /// Whether the last step scheduled nothing although work may be waiting.
    pub fn was_idle(&self) -> bool {
        self.idle
    }

    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Queues `request` as `n` choices with ids `first_id, first_id + 1, ...`. Choice `i` of a
    /// seeded request samples with seed `seed + i`, so the choices differ yet reproduce.
    pub fn add(
        &mut self,
        first_id: u64,
        request: GenerateRequest,
        sender: UnboundedSender<RequestOutput>,
        submitted: Instant,
    ) -> Result<()> {
        let n = request.sampling.n.max(1);
        let parent = RequestId(first_id);
        let wants_logprobs = request.sampling.logprobs.is_some();
        // One copy of the parameters and one stop-string automaton for all the choices.
        let sampling = Arc::new(request.sampling);
        let stop_strings = Arc::new(StopStringSet::new(&sampling.stop));
        for index in 0..n {
            let id = RequestId(first_id + index as u64);
            let seed = sampling.seed.map(|s| s.wrapping_add(index as u64));
            let stops = StopStringMatcher::with_set(stop_strings.clone());
            if index == 0 {
                let mut new =
                    NewRequest::new(id, request.prompt_token_ids.clone(), sampling.clone())
                        .with_priority(request.priority);
                new.seed = seed;
                new.cache_salt = request.cache_salt.clone();
                new.tenant = request.tenant.clone();
                self.scheduler.add_request(new)?;
            } else {
                self.scheduler
                    .fork_request(parent, id, sampling.clone(), seed)?;
            }
            self.active.insert(
                id,
                ActiveRequest {
                    index,
                    sender: sender.clone(),
                    detokenizer: IncrementalDetokenizer::new(
                        &request.prompt_token_ids,
                        request.skip_special_tokens,
                    ),
                    stops,
                    submitted,
                    first_scheduled: None,
                    cached_tokens: None,
                    first_token: None,
                    compute: Duration::ZERO,
                    wants_logprobs,
                },
            );
        }
        self.refresh_stats();
        Ok(())
    }

    /// Aborts requests whose caller dropped its stream; their blocks are freed now.
    /// Returns how many were aborted.
    pub fn abort_abandoned(&mut self) -> usize {
        let gone: Vec<RequestId> = self
            .active
            .iter()
            .filter(|(_, a)| a.sender.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for id in &gone {
            self.scheduler.abort(*id);
            self.active.remove(id);
        }
        if !gone.is_empty() {
            self.refresh_stats();
        }
        gone.len()
    }

    /// Runs one step. Returns the number of requests that finished in it.
    pub fn step(&mut self) -> usize {
        let step_start = Instant::now();
        let batch = self.scheduler.schedule();
        let mut scheduler_time = step_start.elapsed();
        self.idle = batch.is_empty();
        if self.idle {
            return 0;
        }
        self.note_scheduled(&batch, step_start);
        let forward_start = Instant::now();
        let logits = match self.forward(&batch) {
            Ok(logits) => logits,
            Err(message) => return self.fail_batch(&batch, &message),
        };
        let forward_time = forward_start.elapsed();

        let mut sampled: Vec<(RequestId, SampledToken)> = Vec::new();
        for (row, id) in batch.sampled_ids().enumerate() {
            let mut row_logits = logits.row(row).to_vec();
            if let Some(token) = self
                .scheduler
                .sample(&mut self.sampler, id, &mut row_logits)
            {
                sampled.push((id, token));
            }
        }
        let update_start = Instant::now();
        let pairs: Vec<(RequestId, u32)> = sampled.iter().map(|(id, t)| (*id, t.token)).collect();
        let finished = self.scheduler.update_from_output(&batch, &pairs);
        scheduler_time += update_start.elapsed();

        let step_time = step_start.elapsed();
        for entry in &batch.requests {
            if let Some(active) = self.active.get_mut(&entry.id) {
                active.compute += step_time
                    .mul_f64(entry.num_new_tokens as f64 / batch.num_batched_tokens.max(1) as f64);
            }
        }
        let num_finished = self.emit(sampled, finished);
        self.stats.steps_total += 1;
        self.stats.forward_time_total += forward_time;
        self.stats.scheduler_time_total += scheduler_time;
        self.refresh_stats();
        num_finished
    }

    fn note_scheduled(&mut self, batch: &ScheduledBatch, now: Instant) {
        self.stats.preemptions_total += batch.preempted.len() as u64;
        for entry in &batch.requests {
            if let Some(active) = self.active.get_mut(&entry.id) {
                active.first_scheduled.get_or_insert(now);
                if let Some(cached) = entry.num_cached_tokens {
                    active.cached_tokens.get_or_insert(cached);
                }
            }
            if let Some(request) = self.scheduler.request(entry.id) {
                let prompt = request.num_prompt_tokens();
                if entry.num_computed_tokens < prompt {
                    let prompt_part = entry.num_new_tokens.min(prompt - entry.num_computed_tokens);
                    self.stats.prompt_tokens_total += prompt_part as u64;
                }
            }
        }
    }

    fn forward(&mut self, batch: &ScheduledBatch) -> Result<pagoda_models::Logits, String> {
        let mut forward = ForwardBatch::new(batch.block_size);
        for entry in &batch.requests {
            let table: Vec<u32> = entry.block_table.iter().map(|b| b.0).collect();
            let wanted = if entry.needs_logits {
                LogitsWanted::Last
            } else {
                LogitsWanted::None
            };
            forward
                .push(&entry.token_ids, entry.num_computed_tokens, &table, wanted)
                .map_err(|e| e.to_string())?;
        }
        self.runner.forward(&forward).map_err(|e| e.to_string())
    }

    /// A forward pass failed (a bug, not bad input): end every request in it with the error
    /// rather than leave them stuck with their blocks.
    fn fail_batch(&mut self, batch: &ScheduledBatch, message: &str) -> usize {
        let mut n = 0;
        for entry in &batch.requests {
            if let Some(done) = self.scheduler.abort(entry.id) {
                if let Some(active) = self.active.remove(&entry.id) {
                    let completion = completion(&active, &done, Some(message.to_string()));
                    let _ = active
                        .sender
                        .send(RequestOutput::last(active.index, completion));
                }
                n += 1;
            }
        }
        self.refresh_stats();
        n
    }

    /// Sends each sampled token's output, applying stop strings, and closes finished requests.
    fn emit(
        &mut self,
        sampled: Vec<(RequestId, SampledToken)>,
        finished: Vec<FinishedRequest>,
    ) -> usize {
        let mut finished: HashMap<RequestId, FinishedRequest> =
            finished.into_iter().map(|f| (f.id, f)).collect();
        let now = Instant::now();
        let mut num_finished = 0;
        for (id, token) in sampled {
            let Some(active) = self.active.get_mut(&id) else {
                continue;
            };
            self.stats.generation_tokens_total += 1;
            active.first_token.get_or_insert(now);
            let delta = active
                .detokenizer
                .push(&self.tokenizer, &[token.token])
                .unwrap_or_default();
            let mut out = active.stops.push(&delta);
            if out.stopped.is_some() && !finished.contains_key(&id) {
                if let Some(done) = self.scheduler.finish(id, FinishReason::Stop) {
                    finished.insert(id, done);
                }
            }
            let mut text = std::mem::take(&mut out.text);
            let done = finished.remove(&id);
            let completion = done.as_ref().map(|done| {
                if out.stopped.is_none() {
                    let tail = active
                        .detokenizer
                        .flush(&self.tokenizer)
                        .unwrap_or_default();
                    let tail = active.stops.push(&tail);
                    text.push_str(&tail.text);
                    if tail.stopped.is_none() {
                        text.push_str(&active.stops.flush());
                    }
                }
                completion(active, done, None)
            });
            let logprobs = if active.wants_logprobs {
                vec![TokenLogprob {
                    token_id: token.token,
                    logprob: token.logprob,
                    top: token.top_logprobs,
                }]
            } else {
                Vec::new()
            };
            let _ = active.sender.send(RequestOutput {
                index: active.index,
                token_ids: vec![token.token],
                text,
                logprobs,
                cached_tokens: active.cached_tokens,
                finished: completion,
            });
            if done.is_some() {
                self.active.remove(&id);
                num_finished += 1;
            }
        }
        // Requests that finished without a sampled token this step still get a final message.
        for (id, done) in finished {
            if let Some(active) = self.active.remove(&id) {
                let completion = completion(&active, &done, None);
                let _ = active
                    .sender
                    .send(RequestOutput::last(active.index, completion));
                num_finished += 1;
            }
        }
        num_finished
    }

    fn refresh_stats(&mut self) {
        let kv = self.scheduler.kv_cache();
        let prefix = kv.prefix_cache_stats();
        self.stats.num_running = self.scheduler.num_running();
        self.stats.num_waiting = self.scheduler.num_waiting();
        self.stats.num_blocks = kv.num_blocks();
        self.stats.num_free_blocks = kv.num_free_blocks();
        self.stats.prefix_cache_queries = prefix.queries;
        self.stats.prefix_cache_queried_tokens = prefix.queried_tokens;
        self.stats.prefix_cache_hit_tokens = prefix.hit_tokens;
    }
}

fn completion(active: &ActiveRequest, done: &FinishedRequest, error: Option<String>) -> Completion {
    let now = Instant::now();
    Completion {
        finish_reason: done.reason,
        usage: Usage {
            prompt_tokens: done.num_prompt_tokens,
            cached_tokens: done.num_cached_tokens,
            completion_tokens: done.output_token_ids.len(),
        },
        timings: Timings {
            queued: active
                .first_scheduled
                .map_or(Duration::ZERO, |t| t - active.submitted),
            first_token: active.first_token.map(|t| t - active.submitted),
            finished: now - active.submitted,
            compute: active.compute,
        },
        error,
    }
}
