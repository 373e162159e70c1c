//! What `schedule()` hands the model runner for one step.

use crate::ids::{BlockId, RequestId, TokenId};
use crate::kv_cache::slot_for;
use std::ops::Range;

/// One request's share of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduledRequest {
    pub id: RequestId,
    /// Tokens whose KV is already in the cache (including prefix-cache hits).
    pub num_computed_tokens: usize,
    /// Tokens to run this step.
    pub num_new_tokens: usize,
    /// Those tokens: `all_tokens[num_computed_tokens..][..num_new_tokens]`.
    pub token_ids: Vec<TokenId>,
    /// The request's whole block table after this step's allocation.
    pub block_table: Vec<BlockId>,
    /// True when this step reaches the end of the request's known tokens, so its last row of
    /// logits is sampled.
    pub needs_logits: bool,
    /// Set when the request was admitted this step (first time or after preemption): prompt
    /// tokens served from the prefix cache.
    pub num_cached_tokens: Option<usize>,
}

impl ScheduledRequest {
    /// Positions of the new tokens.
    pub fn positions(&self) -> Range<usize> {
        self.num_computed_tokens..self.num_computed_tokens + self.num_new_tokens
    }

    /// Tokens the attention sees after this step.
    pub fn context_len(&self) -> usize {
        self.num_computed_tokens + self.num_new_tokens
    }

    /// KV slot of each new token, for the runner's cache writes.
    pub fn slot_mapping(&self, block_size: usize) -> impl Iterator<Item = usize> + '_ {
        self.positions()
            .map(move |pos| slot_for(&self.block_table, block_size, pos))
    }
}

/// One step's work.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduledBatch {
    /// Running requests first (in admission order), then those admitted this step.
    pub requests: Vec<ScheduledRequest>,
    /// Requests preempted this step: their blocks are gone and they wait to be recomputed.
    pub preempted: Vec<RequestId>,
    /// Sum of `num_new_tokens`.
    pub num_batched_tokens: usize,
    pub block_size: usize,
}

impl ScheduledBatch {
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    pub fn get(&self, id: RequestId) -> Option<&ScheduledRequest> {
        self.requests.iter().find(|r| r.id == id)
    }

    /// Requests whose logits are sampled this step, in batch order.
    pub fn sampled_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.requests
            .iter()
            .filter(|r| r.needs_logits)
            .map(|r| r.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_mapping_follows_the_block_table() {
        let request = ScheduledRequest {
            id: RequestId(1),
            num_computed_tokens: 3,
            num_new_tokens: 3,
            token_ids: vec![0; 3],
            block_table: vec![BlockId(7), BlockId(2)],
            needs_logits: true,
            num_cached_tokens: None,
        };
        // block_size 4: positions 3, 4, 5 -> block 7 offset 3, block 2 offsets 0 and 1.
        assert_eq!(request.slot_mapping(4).collect::<Vec<_>>(), [31, 8, 9]);
        assert_eq!(request.positions(), 3..6);
        assert_eq!(request.context_len(), 6);
    }
}
