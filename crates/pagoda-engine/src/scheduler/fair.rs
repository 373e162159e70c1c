//! Sharing running slots between tenants within a priority class.
//!
//! The scheduler counts running sequences per (priority class, tenant). Three rules use the
//! counts:
//! - admission order: the waiting queue serves the tenant running least first (`queue.rs`);
//! - a *starving* tenant (waiting work, nothing running in a class where another tenant runs)
//!   is admitted in the next step: budget is reserved for its head before running requests take
//!   theirs, and if slots or blocks are short one sequence of the tenant holding the most in the
//!   class is preempted, as long as that tenant holds at least two;
//! - under block pressure the victim is, within the lowest priority class, the most recently
//!   admitted sequence of the tenant holding the most.
//!
//! None of this changes anything while only one tenant has work: it is never starving, and the
//! victim rule reduces to "most recently admitted".

use super::queue::TenantSlot;
use super::{tenant_slot, Scheduler};
use crate::ids::RequestId;
use std::collections::HashSet;

impl Scheduler {
    /// Running sequences of a tenant in a class.
    pub(super) fn load(&self, slot: &TenantSlot) -> usize {
        self.running_load.get(slot).copied().unwrap_or(0)
    }

    /// Adds `id` to the running set (last admitted).
    pub(super) fn start_running(&mut self, id: RequestId) {
        let slot = tenant_slot(&self.requests[&id]);
        *self.running_load.entry(slot).or_default() += 1;
        self.running.push(id);
    }

    /// Takes `id` out of the running set, if it is there.
    pub(super) fn stop_running(&mut self, id: RequestId) {
        let Some(pos) = self.running.iter().position(|&r| r == id) else {
            return;
        };
        self.running.remove(pos);
        let slot = tenant_slot(&self.requests[&id]);
        if let Some(count) = self.running_load.get_mut(&slot) {
            *count -= 1;
            if *count == 0 {
                self.running_load.remove(&slot);
            }
        }
    }

    /// Whether the tenant of `slot` has nothing running in its class while another tenant
    /// does: it is owed a slot now.
    pub(super) fn is_starving(&self, slot: &TenantSlot) -> bool {
        // With nothing of its own running, anyone running in the class is another tenant.
        self.load(slot) == 0
            && self
                .running_load
                .keys()
                .any(|s| s.priority == slot.priority)
    }

    /// The sequence to preempt so that the starving tenant of `slot` can run: the most recently
    /// admitted one of the other tenant holding the most sequences in the class, if it holds at
    /// least two (taking a tenant's only slot would just make it the starving one).
    pub(super) fn fair_share_victim(&self, slot: &TenantSlot) -> Option<RequestId> {
        let mut best: Option<(usize, RequestId)> = None;
        // Most recently admitted first, so ties between tenants go to the newer sequence.
        for &id in self.running.iter().rev() {
            let candidate = tenant_slot(&self.requests[&id]);
            if candidate.priority != slot.priority || candidate.tenant == slot.tenant {
                continue;
            }
            let load = self.load(&candidate);
            if load >= 2 && best.is_none_or(|(most, _)| load > most) {
                best = Some((load, id));
            }
        }
        best.map(|(_, id)| id)
    }

    /// Budget held back from running requests this step for the heads of starving tenants that
    /// can get a slot: their first chunk each, at most half the step (and at least one token
    /// when anyone is owed one).
    pub(super) fn starving_reserve(&self, budget: usize) -> usize {
        // Starving needs someone waiting and someone else running.
        if self.waiting.len() == 0 || self.running_load.is_empty() {
            return 0;
        }
        let slot_free = self.running.len() < self.config.max_num_seqs;
        // Per class: does anyone run in it, and does some tenant hold two or more (a victim
        // for a starving tenant, which holds none)? Computed once, not once per head.
        let mut running_classes = HashSet::new();
        let mut victim_classes = HashSet::new();
        for (slot, &load) in &self.running_load {
            running_classes.insert(slot.priority);
            if load >= 2 {
                victim_classes.insert(slot.priority);
            }
        }
        let owed: usize = self
            .waiting
            .heads()
            .filter(|(key, _)| {
                let class = key.slot.priority;
                self.load(&key.slot) == 0
                    && running_classes.contains(&class)
                    && (slot_free || victim_classes.contains(&class))
            })
            .map(|(_, id)| {
                let request = &self.requests[&id];
                let remaining = request.num_tokens() - request.num_computed_tokens;
                remaining.min(self.config.max_prefill_chunk)
            })
            .sum();
        if owed == 0 {
            return 0;
        }
        owed.min((budget / 2).max(1)).min(budget)
    }

    /// The running request to preempt when blocks run out: lowest priority (largest value),
    /// then the tenant holding the most sequences in that class, then the most recently
    /// admitted. `None` only if nothing runs.
    pub(super) fn pick_victim(&self) -> Option<(usize, RequestId)> {
        self.running
            .iter()
            .enumerate()
            .max_by_key(|(index, id)| {
                let slot = tenant_slot(&self.requests[id]);
                (slot.priority, self.load(&slot), *index)
            })
            .map(|(index, &id)| (index, id))
    }
}
