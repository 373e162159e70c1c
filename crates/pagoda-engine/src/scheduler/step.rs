//! `schedule()`: one step's plan, in named phases.

use super::batch::{ScheduledBatch, ScheduledRequest};
use super::timed::TimeLeft;
use super::{queue_key, Scheduler};
use crate::ids::{BlockId, RequestId};
use crate::kv_cache::CachedPrefix;
use crate::request::RequestStatus;
use std::ops::RangeInclusive;

impl Scheduler {
    /// Plans one step: running requests first, then waiting ones while the token budget,
    /// `max_num_seqs` and free blocks allow. While a latency target applies (`timed.rs`), the
    /// running decodes come first and prefill chunks get the time left, a waiting request
    /// that outranks a running prefill going before it. Call `update_from_output` with the
    /// batch before the next `schedule`.
    pub fn schedule(&mut self) -> ScheduledBatch {
        let total = self.config.max_num_batched_tokens;
        let reserve = self.starving_reserve(total);
        let mut budget = total - reserve;
        let mut batch = ScheduledBatch {
            block_size: self.config.block_size,
            ..ScheduledBatch::default()
        };
        let mut time = self.time_left();
        // Running prefills of a class below the best waiting one wait for its admission.
        let waiting_best = self
            .waiting
            .next(|slot| self.load(slot))
            .map_or(i32::MAX, |(key, _)| key.slot.priority);
        match &mut time {
            None => self.schedule_running(&mut budget, &mut batch, None),
            Some(time) => {
                self.schedule_running(&mut budget, &mut batch, Some(time));
                let outranking = i32::MIN..=waiting_best;
                self.schedule_prefills(&mut budget, &mut batch, outranking, time);
            }
        }
        budget += reserve;
        // A step that had to preempt admits only starving tenants: the freed blocks go to the
        // preempted first.
        let starving_only = !batch.preempted.is_empty();
        self.schedule_waiting(&mut budget, &mut batch, starving_only, time.as_mut());
        if let Some(time) = &mut time {
            if waiting_best < i32::MAX {
                let outranked = waiting_best + 1..=i32::MAX;
                self.schedule_prefills(&mut budget, &mut batch, outranked, time);
            }
        }
        batch.num_batched_tokens = batch.requests.iter().map(|r| r.num_new_tokens).sum();
        batch
    }

    /// Tokens `id` may run now: what it has left to compute, capped by the chunk size and
    /// budget.
    fn num_new_tokens(&self, id: RequestId, num_cached: usize, budget: usize) -> usize {
        let request = &self.requests[&id];
        let remaining = request.num_tokens() - request.num_computed_tokens - num_cached;
        remaining.min(self.config.max_prefill_chunk).min(budget)
    }

    /// Gives each running request its next tokens, preempting others when blocks run out.
    /// With `time` (a timed step) only the decodes, charged to it: prefills follow in
    /// `schedule_prefills`.
    fn schedule_running(
        &mut self,
        budget: &mut usize,
        batch: &mut ScheduledBatch,
        mut time: Option<&mut TimeLeft>,
    ) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let id = self.running[i];
            let request = &self.requests[&id];
            let computed = request.num_computed_tokens;
            let decode = request.num_tokens() - computed == 1;
            let num_new = if time.is_none() || decode {
                self.num_new_tokens(id, 0, *budget)
            } else {
                0
            };
            if num_new == 0 {
                i += 1;
                continue;
            }
            loop {
                if let Some(entry) = self.allocate_running(id, num_new) {
                    if let Some(time) = time.as_deref_mut() {
                        time.charge(computed, num_new, entry.needs_logits, false);
                    }
                    batch.requests.push(entry);
                    *budget -= num_new;
                    i += 1;
                    break;
                }
                let Some((victim_index, victim)) = self.pick_victim() else {
                    i += 1; // Unreachable: `id` itself is running.
                    break;
                };
                self.preempt_one(victim, budget, batch);
                if victim == id {
                    break; // `running[i]` is now the next request.
                }
                if victim_index < i {
                    i -= 1;
                }
            }
        }
    }

    /// Timed steps: running requests still prefilling, of `priorities`, best class first (in
    /// admission order within one), each as many tokens as the time left allows.
    fn schedule_prefills(
        &mut self,
        budget: &mut usize,
        batch: &mut ScheduledBatch,
        priorities: RangeInclusive<i32>,
        time: &mut TimeLeft,
    ) {
        let mut ids: Vec<RequestId> = self
            .running
            .iter()
            .copied()
            .filter(|&id| {
                let request = &self.requests[&id];
                request.num_tokens() - request.num_computed_tokens > 1
                    && priorities.contains(&request.priority)
                    && batch.get(id).is_none()
            })
            .collect();
        ids.sort_by_key(|id| self.requests[id].priority);
        for id in ids {
            if *budget == 0 {
                return;
            }
            let request = &self.requests[&id];
            if request.status != RequestStatus::Running {
                continue; // Preempted for an earlier one.
            }
            let computed = request.num_computed_tokens;
            let remaining = request.num_tokens() - computed;
            let cap = self.num_new_tokens(id, 0, *budget);
            let num_new = time.prefill_tokens(computed, cap, remaining);
            if num_new == 0 {
                continue;
            }
            loop {
                if let Some(entry) = self.allocate_running(id, num_new) {
                    time.charge(computed, num_new, entry.needs_logits, true);
                    batch.requests.push(entry);
                    *budget -= num_new;
                    break;
                }
                let Some((_, victim)) = self.pick_victim() else {
                    break;
                };
                self.preempt_one(victim, budget, batch);
                if victim == id {
                    break;
                }
            }
        }
    }

    /// Blocks for `num_new` more tokens of the running `id`, as its step entry.
    fn allocate_running(&mut self, id: RequestId, num_new: usize) -> Option<ScheduledRequest> {
        let request = &self.requests[&id];
        let none = CachedPrefix::default();
        let table = self.kv.allocate_slots(request, num_new, &none)?.to_vec();
        Some(self.entry(id, num_new, table, None))
    }

    /// Admits waiting requests in the queue's fair order, claiming their cached prefixes. A
    /// starving tenant's head may preempt a sequence of the tenant holding the most to make
    /// room; anyone else stops the admissions when it does not fit (strict order: nobody
    /// behind it jumps ahead).
    fn schedule_waiting(
        &mut self,
        budget: &mut usize,
        batch: &mut ScheduledBatch,
        starving_only: bool,
        mut time: Option<&mut TimeLeft>,
    ) {
        while let Some((key, id)) = self.waiting.next(|slot| self.load(slot)) {
            let starving = self.is_starving(&key.slot);
            if starving_only && !starving {
                break;
            }
            loop {
                if self.try_admit(id, budget, batch, time.as_deref_mut()) {
                    break;
                }
                let victim = if starving {
                    self.fair_share_victim(&key.slot)
                } else {
                    None
                };
                let Some(victim) = victim else {
                    return;
                };
                self.preempt_one(victim, budget, batch);
            }
        }
    }

    /// Admits the waiting request `id` if a running slot, budget and blocks are free for it.
    fn try_admit(
        &mut self,
        id: RequestId,
        budget: &mut usize,
        batch: &mut ScheduledBatch,
        time: Option<&mut TimeLeft>,
    ) -> bool {
        if *budget == 0 || self.running.len() >= self.config.max_num_seqs {
            return false;
        }
        let cached = self.kv.find_cached_prefix(&self.requests[&id]);
        let mut num_new = self.num_new_tokens(id, cached.num_tokens, *budget);
        let request = &self.requests[&id];
        let remaining = request.num_tokens() - request.num_computed_tokens - cached.num_tokens;
        if let Some(time) = time.as_deref() {
            num_new = time.prefill_tokens(cached.num_tokens, num_new, remaining);
            if num_new == 0 {
                return false; // No time left: admissions stop here, in order.
            }
        }
        let Some(table) = self.kv.allocate_slots(request, num_new, &cached) else {
            return false;
        };
        let table = table.to_vec();
        let key = queue_key(request);
        self.waiting.remove(&key);
        let request = self.requests.get_mut(&id).expect("waiting request exists");
        request.status = RequestStatus::Running;
        request.num_computed_tokens = cached.num_tokens;
        request.num_cached_tokens.get_or_insert(cached.num_tokens);
        self.start_running(id);
        let entry = self.entry(id, num_new, table, Some(cached.num_tokens));
        if let Some(time) = time {
            time.charge(cached.num_tokens, num_new, entry.needs_logits, true);
        }
        batch.requests.push(entry);
        *budget -= num_new;
        true
    }

    /// Preempts `id` by recompute: frees its blocks and puts it back in the waiting queue at its
    /// place, keeping its output. If it was already scheduled this step, its entry is withdrawn
    /// and its tokens go back to the budget.
    pub(super) fn preempt_one(
        &mut self,
        id: RequestId,
        budget: &mut usize,
        batch: &mut ScheduledBatch,
    ) {
        self.kv.free(id);
        self.stop_running(id);
        if let Some(pos) = batch.requests.iter().position(|r| r.id == id) {
            *budget += batch.requests.remove(pos).num_new_tokens;
        }
        let request = self.requests.get_mut(&id).expect("running request exists");
        request.status = RequestStatus::Preempted;
        request.num_computed_tokens = 0;
        request.num_preemptions += 1;
        self.waiting.push(queue_key(request), id);
        batch.preempted.push(id);
    }

    fn entry(
        &self,
        id: RequestId,
        num_new: usize,
        block_table: Vec<BlockId>,
        num_cached_tokens: Option<usize>,
    ) -> ScheduledRequest {
        let request = &self.requests[&id];
        let start = request.num_computed_tokens;
        let end = start + num_new;
        ScheduledRequest {
            id,
            num_computed_tokens: start,
            num_new_tokens: num_new,
            token_ids: request.all_token_ids()[start..end].to_vec(),
            block_table,
            needs_logits: end == request.num_tokens(),
            num_cached_tokens,
        }
    }
}
