//! `schedule()`: one step's plan, in named phases.

use super::batch::{ScheduledBatch, ScheduledRequest};
use super::{queue_key, Scheduler};
use crate::ids::{BlockId, RequestId};
use crate::kv_cache::CachedPrefix;
use crate::request::RequestStatus;

impl Scheduler {
    /// Plans one step: running requests first, then waiting ones while the token budget,
    /// `max_num_seqs` and free blocks allow. Call `update_from_output` with the batch before the
    /// next `schedule`.
    pub fn schedule(&mut self) -> ScheduledBatch {
        let mut budget = self.config.max_num_batched_tokens;
        let mut batch = ScheduledBatch {
            block_size: self.config.block_size,
            ..ScheduledBatch::default()
        };
        self.schedule_running(&mut budget, &mut batch);
        // A step that had to preempt admits nobody: the freed blocks go to the preempted first.
        if batch.preempted.is_empty() {
            self.schedule_waiting(&mut budget, &mut batch);
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
    fn schedule_running(&mut self, budget: &mut usize, batch: &mut ScheduledBatch) {
        let mut i = 0;
        while i < self.running.len() && *budget > 0 {
            let id = self.running[i];
            let num_new = self.num_new_tokens(id, 0, *budget);
            if num_new == 0 {
                i += 1;
                continue;
            }
            loop {
                let request = &self.requests[&id];
                let none = CachedPrefix::default();
                let table = self
                    .kv
                    .allocate_slots(request, num_new, &none)
                    .map(<[_]>::to_vec);
                if let Some(table) = table {
                    let entry = self.entry(id, num_new, table, None);
                    batch.requests.push(entry);
                    *budget -= num_new;
                    i += 1;
                    break;
                }
                let (victim_index, victim) = self.pick_victim();
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

    /// Admits waiting requests in queue order, claiming their cached prefixes.
    fn schedule_waiting(&mut self, budget: &mut usize, batch: &mut ScheduledBatch) {
        while *budget > 0 && self.running.len() < self.config.max_num_seqs {
            let Some(id) = self.waiting.peek() else {
                break;
            };
            let cached = self.kv.find_cached_prefix(&self.requests[&id]);
            let num_new = self.num_new_tokens(id, cached.num_tokens, *budget);
            let request = &self.requests[&id];
            // Strict queue order: if the head does not fit, nobody behind it jumps ahead.
            let Some(table) = self.kv.allocate_slots(request, num_new, &cached) else {
                break;
            };
            let table = table.to_vec();
            self.waiting.pop();
            let request = self.requests.get_mut(&id).expect("waiting request exists");
            request.status = RequestStatus::Running;
            request.num_computed_tokens = cached.num_tokens;
            request.num_cached_tokens.get_or_insert(cached.num_tokens);
            self.running.push(id);
            let entry = self.entry(id, num_new, table, Some(cached.num_tokens));
            batch.requests.push(entry);
            *budget -= num_new;
        }
    }

    /// The running request to preempt: lowest priority (largest value), then most recently
    /// admitted.
    fn pick_victim(&self) -> (usize, RequestId) {
        self.running
            .iter()
            .enumerate()
            .max_by_key(|(index, id)| (self.requests[id].priority, *index))
            .map(|(index, &id)| (index, id))
            .expect("a request is running when blocks run out")
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
        self.running.retain(|&r| r != id);
        if let Some(pos) = batch.requests.iter().position(|r| r.id == id) {
            *budget += batch.requests.remove(pos).num_new_tokens;
        }
        let request = self.requests.get_mut(&id).expect("running request exists");
        request.status = RequestStatus::Preempted;
        request.num_computed_tokens = 0;
        request.num_preemptions += 1;
        let key = queue_key(request);
        self.waiting.push(key, id);
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
