//! One engine step, synchronously: schedule -> forward -> sample -> update -> stream out.
//! Owns all engine state; the thread in `engine_loop.rs` drives it and recovers from a panic
//! in a step with `fail_step`.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pagoda_engine::{
    AllowedTokens, FinishReason, FinishedRequest, NewRequest, RequestId, SampleInput, SampledToken,
    Sampler, ScheduledBatch, Scheduler, StopStringMatcher, StopStringSet,
};
use pagoda_models::{ForwardBatch, LogitsWanted, ModelRunner};
use pagoda_structured::{Constraint, TokenMask};
use pagoda_text::{IncrementalDetokenizer, Tokenizer};

use crate::error::Result;
use crate::output_channel::OutputSender;
use crate::pending::PendingSlot;
use crate::request::{
    Completion, FailureCause, GenerateRequest, RequestOutput, Timings, TokenLogprob, Usage,
};
use crate::stats::EngineStats;

/// Per-choice state that lives outside the scheduler: where its output goes and the text side.
struct ActiveRequest {
    index: usize,
    sender: OutputSender,
    /// Unread outputs on the stream past which the caller counts as gone (all choices).
    unread_limit: usize,
    detokenizer: IncrementalDetokenizer,
    stops: StopStringMatcher,
    submitted: Instant,
    first_scheduled: Option<Instant>,
    /// From the first admission, as the scheduler reports it at the end.
    cached_tokens: Option<usize>,
    first_token: Option<Instant>,
    compute: Duration,
    wants_logprobs: bool,
    /// `stats.steps_total` when it reached the engine.
    steps_at_add: u64,
    steps_waited: u64,
    num_prompt_tokens: usize,
    num_output_tokens: usize,
    /// Its place in the pending counts, given back with the final output (or when this is
    /// dropped).
    pending: Option<PendingSlot>,
    /// What its output must match; lent to the mask worker during a step.
    constraint: Option<Constraint>,
    /// The constraint is complete: the output ends now.
    constraint_done: bool,
    /// Set before the request is failed for a reason that is the client's.
    failure_cause: FailureCause,
}

impl ActiveRequest {
    /// Sends `output`; a final one first gives the request's pending place back, so that a
    /// caller who reads it and submits again is not refused for its own finished request.
    fn send(&mut self, output: RequestOutput) {
        if output.finished.is_some() {
            self.pending = None;
        }
        self.sender.send(output);
    }
}

pub struct EngineCore {
    scheduler: Scheduler,
    /// One per worker of the kernels' pool (scratch buffers only).
    samplers: Vec<Sampler>,
    runner: ModelRunner,
    tokenizer: Arc<Tokenizer>,
    active: HashMap<RequestId, ActiveRequest>,
    stats: EngineStats,
    /// The last step found nothing it could schedule.
    idle: bool,
    /// The requests of the step in progress: the ones to fail if it panics.
    in_step: Vec<RequestId>,
    /// `EngineConfig::max_unread_outputs` (0: no limit).
    max_unread_per_choice: usize,
    /// Where prefix-cache changes go after each step.
    kv_events: Option<crate::KvEventSink>,
    #[cfg(feature = "fault-injection")]
    faults: crate::faults::FaultInjection,
    /// A request that should kill the loop was queued (fault injection).
    #[cfg(feature = "fault-injection")]
    kill_requested: bool,
}

impl EngineCore {
    pub fn new(scheduler: Scheduler, runner: ModelRunner, tokenizer: Arc<Tokenizer>) -> Self {
        let mut core = EngineCore {
            scheduler,
            samplers: Vec::new(),
            runner,
            tokenizer,
            active: HashMap::new(),
            stats: EngineStats::default(),
            idle: false,
            in_step: Vec::new(),
            max_unread_per_choice: 0,
            kv_events: None,
            #[cfg(feature = "fault-injection")]
            faults: Default::default(),
            #[cfg(feature = "fault-injection")]
            kill_requested: false,
        };
        core.refresh_stats();
        core
    }

    pub fn set_max_unread_outputs(&mut self, per_choice: usize) {
        self.max_unread_per_choice = per_choice;
    }

    /// Sends prefix-cache changes to `sink` (the scheduler must log them:
    /// `Scheduler::enable_kv_events`).
    pub fn set_kv_events(&mut self, sink: Option<crate::KvEventSink>) {
        self.kv_events = sink;
    }

    /// Hands the prefix-cache changes since the last call to the sink, if any. Also called
    /// after a failed step: its evictions happened all the same.
    pub fn publish_kv_events(&mut self) {
        let Some(sink) = &self.kv_events else {
            return;
        };
        let start = Instant::now();
        let events = self.scheduler.take_kv_events();
        if !events.is_empty() {
            sink.send(events);
        }
        self.stats.kv_events_time_total += start.elapsed();
    }

    /// Every block hash in the prefix cache (what a router's copy built from the KV events
    /// must hold).
    pub fn prefix_cache_hashes(&self) -> Vec<pagoda_engine::BlockHash> {
        self.scheduler.kv_cache().pool().cached_hashes().collect()
    }

    #[cfg(feature = "fault-injection")]
    pub fn set_faults(&mut self, faults: crate::faults::FaultInjection) {
        self.faults = faults;
    }

    /// Panics if a request queued since the last call should kill the engine loop.
    #[cfg(feature = "fault-injection")]
    pub fn kill_if_requested(&mut self) {
        if std::mem::take(&mut self.kill_requested) {
            panic!("fault injection: the engine loop dies");
        }
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

    /// Queues `request` as `n` choices with ids `first_id, first_id + 1, ...`, each holding one
    /// of `pending`. Choice `i` of a seeded request samples with seed `seed + i`, so the
    /// choices differ yet reproduce. On error no choice stays queued.
    pub fn add(
        &mut self,
        first_id: u64,
        request: GenerateRequest,
        sender: OutputSender,
        submitted: Instant,
        pending: Vec<PendingSlot>,
    ) -> Result<()> {
        let n = request.sampling.n.max(1);
        let result = self.add_choices(first_id, n, request, sender, submitted, pending);
        if result.is_err() {
            self.discard(first_id, n);
        }
        self.refresh_stats();
        result
    }

    fn add_choices(
        &mut self,
        first_id: u64,
        n: usize,
        request: GenerateRequest,
        sender: OutputSender,
        submitted: Instant,
        pending: Vec<PendingSlot>,
    ) -> Result<()> {
        #[cfg(feature = "fault-injection")]
        if crate::faults::FaultInjection::hits(
            self.faults.kill_loop_on_token,
            &request.prompt_token_ids,
        ) {
            self.kill_requested = true;
        }
        let parent = RequestId(first_id);
        let wants_logprobs = request.sampling.logprobs.is_some();
        let constraint = request.constraint;
        // One copy of the parameters and one stop-string automaton for all the choices.
        let sampling = Arc::new(request.sampling);
        let stop_strings = Arc::new(StopStringSet::new(&sampling.stop));
        let mut pending = pending.into_iter();
        for index in 0..n {
            let id = RequestId(first_id + index as u64);
            let seed = sampling.seed.map(|s| s.wrapping_add(index as u64));
            if index == 0 {
                let mut new =
                    NewRequest::new(id, request.prompt_token_ids.clone(), sampling.clone())
                        .with_priority(request.priority);
                new.seed = seed;
                new.cache_salt = request.cache_salt.clone();
                new.tenant = request.tenant.clone();
                new.itl_target_ms = request.itl_target_ms;
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
                    unread_limit: match self.max_unread_per_choice {
                        0 => usize::MAX,
                        per_choice => per_choice.saturating_mul(n),
                    },
                    detokenizer: IncrementalDetokenizer::new(
                        &request.prompt_token_ids,
                        request.skip_special_tokens,
                    ),
                    stops: StopStringMatcher::with_set(stop_strings.clone()),
                    submitted,
                    first_scheduled: None,
                    cached_tokens: None,
                    first_token: None,
                    compute: Duration::ZERO,
                    wants_logprobs,
                    steps_at_add: self.stats.steps_total,
                    steps_waited: 0,
                    num_prompt_tokens: request.prompt_token_ids.len(),
                    num_output_tokens: 0,
                    pending: pending.next(),
                    constraint: constraint.clone(),
                    constraint_done: false,
                    failure_cause: FailureCause::Internal,
                },
            );
        }
        Ok(())
    }

    /// Drops every trace of the choices `first_id..first_id + n` without a word on their
    /// stream (the caller reports why).
    pub fn discard(&mut self, first_id: u64, n: usize) {
        for index in 0..n {
            let id = RequestId(first_id + index as u64);
            self.scheduler.abort(id);
            self.active.remove(&id);
        }
        self.refresh_stats();
    }

    /// Aborts requests whose caller dropped its stream, or stopped reading it (more than
    /// `unread_limit` outputs waiting: the queue would grow without end); their blocks are
    /// freed now. A stalled caller finds a final `abort` output after what it has not read,
    /// with the usage of everything generated. Returns how many were aborted.
    pub fn abort_abandoned(&mut self) -> usize {
        let gone: Vec<(RequestId, bool)> = self
            .active
            .iter()
            .filter_map(|(id, a)| {
                if a.sender.is_closed() {
                    Some((*id, false))
                } else {
                    (a.sender.unread() > a.unread_limit).then_some((*id, true))
                }
            })
            .collect();
        for &(id, stalled) in &gone {
            self.scheduler.abort(id);
            let Some(mut active) = self.active.remove(&id) else {
                continue;
            };
            if stalled {
                let end = aborted(&active, None);
                active.send(RequestOutput::last(active.index, end));
            }
        }
        if !gone.is_empty() {
            self.refresh_stats();
        }
        gone.len()
    }

    /// Runs one step. Returns the number of requests that finished in it. If it panics, call
    /// `fail_step` before anything else.
    pub fn step(&mut self) -> usize {
        let step_start = Instant::now();
        self.in_step.clear();
        let batch = self.scheduler.schedule();
        let mut scheduler_time = step_start.elapsed();
        self.idle = batch.is_empty();
        if self.idle {
            return 0;
        }
        self.in_step.extend(batch.requests.iter().map(|r| r.id));
        self.note_scheduled(&batch, step_start);
        #[cfg(feature = "fault-injection")]
        self.inject_step_fault(&batch);
        let forward_start = Instant::now();
        let mut lent = self.lend_constraints(&batch);
        let (logits, masks) = std::thread::scope(|scope| {
            // Masks depend only on tokens already sampled: they are computed while the
            // forward pass runs.
            let worker = (!lent.is_empty()).then(|| scope.spawn(|| compute_masks(&mut lent)));
            let logits = self.forward(&batch);
            let masks = worker.map(|w| {
                w.join().map_err(|panic| {
                    format!("the output constraint failed: {}", panic_message(&*panic))
                })
            });
            (logits, masks)
        });
        let masks = self.return_constraints(lent, masks);
        let logits = match logits {
            Ok(logits) => logits,
            Err(message) => return self.fail_batch(&batch, &message),
        };
        let forward_time = forward_start.elapsed();

        let ids: Vec<RequestId> = batch.sampled_ids().collect();
        let mut allowed = Vec::with_capacity(ids.len());
        let mut num_failed = 0;
        for &id in &ids {
            allowed.push(match masks.get(&id) {
                None => Ok(None),
                Some(Ok(mask)) => Ok(Some(AllowedTokens::new(mask.words()))),
                Some(Err(message)) => Err(message.clone()),
            });
        }
        let tokens = self.sample_rows(&ids, logits, &allowed);
        let mut sampled: Vec<(RequestId, SampledToken)> = Vec::new();
        for ((&id, allowed), token) in ids.iter().zip(&allowed).zip(tokens) {
            if let Err(message) = allowed {
                self.blame_constraint(id);
                num_failed += usize::from(self.fail(id, message));
                continue;
            }
            let token = match token {
                Ok(Some(token)) => token,
                Ok(None) => continue,
                // Only this request fails; `update_from_output` skips it once aborted.
                Err(message) => {
                    num_failed += usize::from(self.fail(id, &message));
                    continue;
                }
            };
            if let Err(message) = self.advance_constraint(id, token.token) {
                self.blame_constraint(id);
                num_failed += usize::from(self.fail(id, &message));
                continue;
            }
            sampled.push((id, token));
        }
        let update_start = Instant::now();
        let pairs: Vec<(RequestId, u32)> = sampled.iter().map(|(id, t)| (*id, t.token)).collect();
        let mut finished = self.scheduler.update_from_output(&batch, &pairs);
        let forced = self.fast_forward(&sampled, &mut finished);
        scheduler_time += update_start.elapsed();

        let step_time = step_start.elapsed();
        self.scheduler.record_step_time(&batch, step_time);
        for entry in &batch.requests {
            if let Some(active) = self.active.get_mut(&entry.id) {
                active.compute += step_time
                    .mul_f64(entry.num_new_tokens as f64 / batch.num_batched_tokens.max(1) as f64);
            }
        }
        let num_finished = self.emit(sampled, forced, finished) + num_failed;
        self.stats.steps_total += 1;
        self.stats.forward_time_total += forward_time;
        self.stats.scheduler_time_total += scheduler_time;
        self.stats.step_cost = self.scheduler.step_cost_model();
        self.refresh_stats();
        self.in_step.clear();
        num_finished
    }

    /// Takes the constraints of the batch's sampled requests for the mask worker; deferred
    /// ones (a reasoning model still thinking) have no mask yet and stay.
    fn lend_constraints(&mut self, batch: &ScheduledBatch) -> Vec<(RequestId, Constraint)> {
        batch
            .sampled_ids()
            .filter_map(|id| {
                let slot = &mut self.active.get_mut(&id)?.constraint;
                let constraint = slot.take_if(|c| c.is_active())?;
                Some((id, constraint))
            })
            .collect()
    }

    /// Puts lent constraints back and returns each one's mask (or why there is none).
    fn return_constraints(
        &mut self,
        lent: Vec<(RequestId, Constraint)>,
        masks: Option<Result<ComputedMasks, String>>,
    ) -> HashMap<RequestId, Result<TokenMask, String>> {
        let masks: Vec<MaskResult> = match masks {
            None => return HashMap::new(),
            Some(Ok((masks, took))) => {
                self.stats.constraint_masks_total +=
                    masks.iter().filter(|m| !matches!(m, Ok(None))).count() as u64;
                self.stats.constraint_mask_time_total += took;
                masks
            }
            Some(Err(message)) => lent.iter().map(|_| Err(message.clone())).collect(),
        };
        let mut out = HashMap::with_capacity(lent.len());
        for ((id, constraint), mask) in lent.into_iter().zip(masks) {
            if let Some(active) = self.active.get_mut(&id) {
                active.constraint = Some(constraint);
            }
            match mask {
                Ok(None) => {}
                Ok(Some(mask)) => {
                    out.insert(id, Ok(mask));
                }
                Err(message) => {
                    out.insert(id, Err(message));
                }
            }
        }
        out
    }

    /// Appends the tokens each constrained request's grammar now forces (not for requests that
    /// want logprobs: forced tokens have none). Returns them per request; requests that end
    /// on them join `finished`.
    fn fast_forward(
        &mut self,
        sampled: &[(RequestId, SampledToken)],
        finished: &mut Vec<FinishedRequest>,
    ) -> HashMap<RequestId, Vec<u32>> {
        let mut forced = HashMap::new();
        for (id, _) in sampled {
            if finished.iter().any(|f| f.id == *id) {
                continue;
            }
            let Some(active) = self.active.get_mut(id) else {
                continue;
            };
            let Some(constraint) = active.constraint.as_mut() else {
                continue;
            };
            if active.wants_logprobs || active.constraint_done {
                continue;
            }
            let tokens = match constraint.fast_forward() {
                Ok(tokens) if tokens.is_empty() => continue,
                Ok(tokens) => tokens,
                Err(e) => {
                    self.blame_constraint(*id);
                    self.fail(*id, &e.to_string());
                    continue;
                }
            };
            active.constraint_done = constraint.is_finished();
            let (appended, done) = self.scheduler.append_forced(*id, &tokens);
            forced.insert(*id, tokens[..appended].to_vec());
            finished.extend(done);
        }
        forced
    }

    /// The next failure of `id` is its constraint's (its grammar hit llguidance's limits).
    fn blame_constraint(&mut self, id: RequestId) {
        if let Some(active) = self.active.get_mut(&id) {
            active.failure_cause = FailureCause::Constraint;
        }
    }

    /// Tells `id`'s constraint the token it sampled; an end-of-sequence token, or a token
    /// that completes the constraint, ends the output.
    fn advance_constraint(&mut self, id: RequestId, token: u32) -> Result<(), String> {
        let eos = self.scheduler.eos_token_ids().contains(&token);
        let Some(active) = self.active.get_mut(&id) else {
            return Ok(());
        };
        let Some(constraint) = active.constraint.as_mut() else {
            return Ok(());
        };
        if eos {
            // The mask allows end-of-sequence only where the output is complete.
            active.constraint_done = constraint.is_active();
            return Ok(());
        }
        constraint.advance(token).map_err(|e| e.to_string())?;
        active.constraint_done = constraint.is_finished();
        Ok(())
    }

    /// Samples row `i` of `logits` for `ids[i]`, among `allowed[i]` (rows whose mask failed are
    /// skipped), the rows split over the kernels' pool: a 151,936-entry row takes ~0.7 ms at
    /// temperature 1, and 32 rows in turn would leave the other cores idle. A panic while
    /// sampling a row fails that request alone.
    fn sample_rows(
        &mut self,
        ids: &[RequestId],
        mut logits: pagoda_models::Logits,
        allowed: &[std::result::Result<Option<AllowedTokens<'_>>, String>],
    ) -> Vec<std::result::Result<Option<SampledToken>, String>> {
        let faults = self.sampling_faults(ids);
        let vocab = logits.vocab_size;
        let mut rows: Vec<SampleRow<'_>> = self
            .scheduler
            .sample_inputs(ids)
            .into_iter()
            .zip(logits.data.chunks_mut(vocab))
            .zip(allowed)
            .zip(faults)
            .map(|(((input, logits), allowed), fault)| SampleRow {
                input: match allowed {
                    Ok(allowed) => input.map(|input| SampleInput {
                        allowed: *allowed,
                        ..input
                    }),
                    Err(_) => None,
                },
                logits,
                fault,
                token: Ok(None),
            })
            .collect();
        let workers = rayon::current_num_threads().clamp(1, rows.len().max(1));
        if self.samplers.len() < workers {
            self.samplers.resize_with(workers, Sampler::new);
        }
        let per_worker = rows.len().div_ceil(workers).max(1);
        if workers == 1 {
            rows.iter_mut()
                .for_each(|row| row.sample(&mut self.samplers[0]));
        } else {
            use rayon::prelude::*;
            rows.par_chunks_mut(per_worker)
                .zip(self.samplers.par_iter_mut())
                .for_each(|(rows, sampler)| rows.iter_mut().for_each(|row| row.sample(sampler)));
        }
        rows.into_iter().map(|row| row.token).collect()
    }

    /// Which rows' sampling panics (fault injection).
    #[cfg(feature = "fault-injection")]
    fn sampling_faults(&self, ids: &[RequestId]) -> Vec<bool> {
        let on = self.faults.panic_sampling_on_token;
        ids.iter()
            .map(|&id| {
                self.scheduler
                    .request(id)
                    .is_some_and(|r| crate::faults::FaultInjection::hits(on, r.prompt_token_ids()))
            })
            .collect()
    }

    #[cfg(not(feature = "fault-injection"))]
    fn sampling_faults(&self, ids: &[RequestId]) -> Vec<bool> {
        vec![false; ids.len()]
    }

    #[cfg(feature = "fault-injection")]
    fn inject_step_fault(&self, batch: &ScheduledBatch) {
        let token = self.faults.panic_step_on_token;
        let hit = batch.requests.iter().any(|entry| {
            self.scheduler
                .request(entry.id)
                .is_some_and(|r| crate::faults::FaultInjection::hits(token, r.prompt_token_ids()))
        });
        if hit {
            panic!("fault injection: the step panics");
        }
    }

    /// Recovers from a panic in `step` (or in the work around it): the requests of that step
    /// end with `message` and their blocks are freed; the others carry on. If the panic came
    /// before the step knew its requests (inside scheduling), the scheduler's state cannot be
    /// trusted and every request fails. Returns how many ended.
    pub fn fail_step(&mut self, message: &str) -> usize {
        let mut ids = std::mem::take(&mut self.in_step);
        if ids.is_empty() {
            ids = self.active.keys().copied().collect();
            ids.sort();
        }
        let n = ids.iter().filter(|&&id| self.fail(id, message)).count();
        self.idle = false;
        self.refresh_stats();
        n
    }

    /// Ends one request with an error: aborted in the scheduler (blocks freed) and a final
    /// output with `error` set on its stream. Returns whether it was live.
    fn fail(&mut self, id: RequestId, message: &str) -> bool {
        let done = self.scheduler.abort(id);
        let Some(mut active) = self.active.remove(&id) else {
            return done.is_some();
        };
        let completion = match &done {
            Some(done) => completion(&active, done, Some(message.to_string())),
            None => lost(&active, message),
        };
        let index = active.index;
        active.send(RequestOutput::last(index, completion));
        true
    }

    /// The engine loop is dying: every open request gets a final output with `message`,
    /// without touching the scheduler (whose state may be what broke).
    pub fn fail_all(&mut self, message: &str) {
        for (_, mut active) in self.active.drain() {
            let output = RequestOutput::last(active.index, lost(&active, message));
            active.send(output);
        }
    }

    fn note_scheduled(&mut self, batch: &ScheduledBatch, now: Instant) {
        self.stats.preemptions_total += batch.preempted.len() as u64;
        for entry in &batch.requests {
            if let Some(active) = self.active.get_mut(&entry.id) {
                if active.first_scheduled.is_none() {
                    active.first_scheduled = Some(now);
                    active.steps_waited = self.stats.steps_total - active.steps_at_add;
                }
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
        #[cfg(feature = "fault-injection")]
        if let Some(per_token) = self.faults.slow_forward_per_token {
            std::thread::sleep(per_token * batch.num_batched_tokens as u32);
        }
        self.runner.forward(&forward).map_err(|e| e.to_string())
    }

    /// A forward pass failed (a bug, not bad input): end every request in it with the error
    /// rather than leave them stuck with their blocks.
    fn fail_batch(&mut self, batch: &ScheduledBatch, message: &str) -> usize {
        let n = batch
            .requests
            .iter()
            .filter(|entry| self.fail(entry.id, message))
            .count();
        self.refresh_stats();
        self.in_step.clear();
        n
    }

    /// Sends each sampled token's output, applying stop strings, and closes finished requests.
    fn emit(
        &mut self,
        sampled: Vec<(RequestId, SampledToken)>,
        mut forced: HashMap<RequestId, Vec<u32>>,
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
            let mut token_ids = vec![token.token];
            token_ids.extend(forced.remove(&id).unwrap_or_default());
            self.stats.generation_tokens_total += token_ids.len() as u64;
            active.num_output_tokens += token_ids.len();
            active.first_token.get_or_insert(now);
            let delta = active
                .detokenizer
                .push(&self.tokenizer, &token_ids)
                .unwrap_or_default();
            let mut out = active.stops.push(&delta);
            if (out.stopped.is_some() || active.constraint_done) && !finished.contains_key(&id) {
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
            let output = RequestOutput {
                index: active.index,
                token_ids,
                text,
                logprobs,
                cached_tokens: active.cached_tokens,
                finished: completion,
            };
            active.send(output);
            if done.is_some() {
                self.active.remove(&id);
                num_finished += 1;
            }
        }
        // Requests that finished without a sampled token this step still get a final message.
        for (id, done) in finished {
            if let Some(mut active) = self.active.remove(&id) {
                let output = RequestOutput::last(active.index, completion(&active, &done, None));
                active.send(output);
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
    let cause = active.failure_cause;
    let usage = Usage {
        prompt_tokens: done.num_prompt_tokens,
        cached_tokens: done.num_cached_tokens,
        completion_tokens: done.output_token_ids.len(),
    };
    Completion {
        finish_reason: done.reason,
        usage,
        timings: timings(active),
        error,
        cause,
    }
}

/// The end of a request the scheduler no longer knows (or should not be asked about): what
/// the text side saw of it, aborted with `message`.
fn lost(active: &ActiveRequest, message: &str) -> Completion {
    aborted(active, Some(message.to_string()))
}

/// An abort with what the text side counted, and the error if it is a failure.
fn aborted(active: &ActiveRequest, error: Option<String>) -> Completion {
    Completion {
        finish_reason: FinishReason::Abort,
        usage: Usage {
            prompt_tokens: active.num_prompt_tokens,
            cached_tokens: active.cached_tokens.unwrap_or(0),
            completion_tokens: active.num_output_tokens,
        },
        timings: timings(active),
        error,
        cause: active.failure_cause,
    }
}

/// One row of a step's sampling: the request's inputs (`None`: nothing to sample), its logits
/// (overwritten), and the outcome.
struct SampleRow<'a> {
    input: Option<SampleInput<'a>>,
    logits: &'a mut [f32],
    /// Fault injection: sampling this row panics.
    fault: bool,
    token: std::result::Result<Option<SampledToken>, String>,
}

impl SampleRow<'_> {
    fn sample(&mut self, sampler: &mut Sampler) {
        let Some(input) = self.input.take() else {
            return;
        };
        let (logits, fault) = (&mut *self.logits, self.fault);
        self.token = catch_unwind(AssertUnwindSafe(|| {
            if fault {
                panic!("fault injection: sampling panics");
            }
            Some(sampler.sample(logits, input))
        }))
        .map_err(|panic| {
            format!(
                "internal error while sampling this request: {}",
                panic_message(&*panic)
            )
        });
    }
}

fn timings(active: &ActiveRequest) -> Timings {
    let now = Instant::now();
    Timings {
        queued: active
            .first_scheduled
            .map_or(Duration::ZERO, |t| t - active.submitted),
        first_token: active.first_token.map(|t| t - active.submitted),
        finished: now - active.submitted,
        compute: active.compute,
        steps_waited: active.steps_waited,
    }
}

/// One constraint's next mask: `None` while it does not apply yet, `Err` if it cannot go on.
type MaskResult = Result<Option<TokenMask>, String>;

/// The masks of one step's lent constraints, in order, and how long they took together.
type ComputedMasks = (Vec<MaskResult>, Duration);

/// Each lent constraint's next mask (a mask that allows nothing is an error: the output
/// could not continue).
fn compute_masks(lent: &mut [(RequestId, Constraint)]) -> ComputedMasks {
    let start = Instant::now();
    let masks = lent
        .iter_mut()
        .map(|(_, constraint)| match constraint.mask() {
            Ok(Some(mask)) if mask.num_allowed() == 0 => {
                Err("the output constraint allows no next token".to_string())
            }
            Ok(mask) => Ok(mask),
            Err(e) => Err(e.to_string()),
        })
        .collect();
    (masks, start.elapsed())
}

/// The message a panic carried, for error reports.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}
