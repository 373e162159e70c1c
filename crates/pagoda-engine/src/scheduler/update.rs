//! After a step: append sampled tokens, advance progress, cache full blocks, end requests.

use super::batch::ScheduledBatch;
use super::{queue_key, Scheduler};
use crate::error::EngineError;
use crate::ids::{RequestId, TokenId};
use crate::request::{NewRequest, Request, RequestStatus};
use crate::sampling::SamplingParams;
use crate::stop::FinishReason;
use std::collections::HashMap;
use std::sync::Arc;

/// A request that ended, with what usage reporting needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedRequest {
    pub id: RequestId,
    pub reason: FinishReason,
    pub num_prompt_tokens: usize,
    /// Prompt tokens served from the prefix cache at first admission.
    pub num_cached_tokens: usize,
    /// All output tokens, including a final EOS or stop token.
    pub output_token_ids: Vec<TokenId>,
}

impl FinishedRequest {
    fn new(request: Request, reason: FinishReason) -> Self {
        Self {
            id: request.id(),
            reason,
            num_prompt_tokens: request.num_prompt_tokens(),
            num_cached_tokens: request.num_cached_tokens().unwrap_or(0),
            output_token_ids: request.output_token_ids().to_vec(),
        }
    }
}

impl Scheduler {
    /// Applies a step's results: each scheduled request's computed tokens advance, requests
    /// that needed logits get their sampled token, newly full blocks enter the prefix cache, and
    /// requests the `StopChecker` ends are finished and their blocks freed. Requests aborted
    /// since `schedule` are skipped. Returns the requests that finished.
    pub fn update_from_output(
        &mut self,
        batch: &ScheduledBatch,
        sampled: &[(RequestId, TokenId)],
    ) -> Vec<FinishedRequest> {
        let sampled: HashMap<RequestId, TokenId> = sampled.iter().copied().collect();
        let mut finished = Vec::new();
        for entry in &batch.requests {
            let Some(request) = self.requests.get_mut(&entry.id) else {
                continue;
            };
            if request.status != RequestStatus::Running {
                continue;
            }
            debug_assert_eq!(
                request.num_computed_tokens, entry.num_computed_tokens,
                "update_from_output got a stale batch"
            );
            request.num_computed_tokens = entry.context_len();
            let token = sampled.get(&entry.id).filter(|_| entry.needs_logits);
            debug_assert!(
                !entry.needs_logits || token.is_some(),
                "no sampled token for {}",
                entry.id
            );
            if let Some(&token) = token {
                request.append_token(token, &self.hasher, self.config.block_size);
            }
            self.kv
                .cache_full_blocks(request, request.num_computed_tokens);
            let reason = token.and_then(|_| {
                let params = &request.sampling;
                self.stop.check(
                    params,
                    request.num_prompt_tokens(),
                    request.output_token_ids(),
                )
            });
            if let Some(reason) = reason {
                finished.extend(self.finish(entry.id, reason));
            }
        }
        finished
    }

    /// Appends tokens a constraint forces after `id`'s last sampled one (fast-forward): they
    /// are computed with the next step, as a short chunk, and sampling resumes after them.
    /// Stops early where the stop rules end the request (`max_tokens`, a stop token). Returns
    /// how many were appended and, if the request ended, its end.
    pub fn append_forced(
        &mut self,
        id: RequestId,
        tokens: &[TokenId],
    ) -> (usize, Option<FinishedRequest>) {
        let Some(request) = self.requests.get_mut(&id) else {
            return (0, None);
        };
        if request.status != RequestStatus::Running {
            return (0, None);
        }
        for (i, &token) in tokens.iter().enumerate() {
            request.append_token(token, &self.hasher, self.config.block_size);
            let reason = self.stop.check(
                &request.sampling,
                request.num_prompt_tokens(),
                request.output_token_ids(),
            );
            if let Some(reason) = reason {
                return (i + 1, self.finish(id, reason));
            }
        }
        (tokens.len(), None)
    }

    /// Ends a request for `reason` wherever it is (waiting or running) and frees its blocks.
    /// Used for stop strings found on the text side. `None` if it is unknown.
    pub fn finish(&mut self, id: RequestId, reason: FinishReason) -> Option<FinishedRequest> {
        let request = self.requests.get(&id)?;
        match request.status {
            RequestStatus::Running => self.stop_running(id),
            RequestStatus::Waiting | RequestStatus::Preempted => {
                let key = queue_key(request);
                self.waiting.remove(&key);
            }
            RequestStatus::Finished(_) => {}
        }
        let mut request = self.requests.remove(&id)?;
        self.kv.free(id);
        request.status = RequestStatus::Finished(reason);
        Some(FinishedRequest::new(request, reason))
    }

    /// Cancels a request at any time and frees its blocks.
    pub fn abort(&mut self, id: RequestId) -> Option<FinishedRequest> {
        self.finish(id, FinishReason::Abort)
    }

    /// Starts `child` as another completion of `parent`'s prompt (`n > 1`) with its own
    /// sampling parameters (normally the parent's, shared) and RNG seed (`None`: the
    /// parameters' seed, or a fresh one). If the parent is running, the child shares the
    /// parent's computed full prompt blocks and runs at once (when `max_num_seqs` allows),
    /// recomputing only the prompt's partial last block; otherwise it queues behind the parent
    /// and finds the prompt through the prefix cache.
    pub fn fork_request(
        &mut self,
        parent: RequestId,
        child: RequestId,
        sampling: impl Into<Arc<SamplingParams>>,
        seed: Option<u64>,
    ) -> Result<(), EngineError> {
        let parent_request = self
            .requests
            .get(&parent)
            .ok_or(EngineError::UnknownRequest(parent))?;
        let new = NewRequest {
            id: child,
            prompt_token_ids: parent_request.prompt_token_ids().to_vec(),
            sampling: sampling.into(),
            seed,
            priority: parent_request.priority,
            cache_salt: parent_request.cache_salt.clone(),
            tenant: parent_request.tenant.clone(),
            itl_target_ms: parent_request.itl_target_ms,
        };
        let parent_running = parent_request.status == RequestStatus::Running;
        self.add_request(new)?;
        if !parent_running || self.running.len() >= self.config.max_num_seqs {
            return Ok(());
        }
        let shared = self.kv.fork(&self.requests[&parent], child);
        if shared == 0 {
            return Ok(());
        }
        let request = self.requests.get_mut(&child).expect("just added");
        let key = queue_key(request);
        request.status = RequestStatus::Running;
        request.num_computed_tokens = shared;
        request.num_cached_tokens = Some(shared);
        self.waiting.remove(&key);
        self.start_running(child);
        Ok(())
    }
}
