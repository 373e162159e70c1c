//! Exact-state tests of the scheduler, built from small factory functions.

use super::*;
use crate::ids::{BlockId, CacheSalt, TenantKey};
use crate::request::RequestStatus;
use crate::sampling::{Sampler, SamplingParams};
use crate::stop::FinishReason;

const EOS: TokenId = 999;

fn config(budget: usize, block_size: usize, num_blocks: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_num_batched_tokens: budget,
        max_num_seqs: 16,
        max_prefill_chunk: 1024,
        block_size,
        num_blocks,
        max_model_len: 1024,
        sampling_seed: Some(0),
        ..SchedulerConfig::default()
    }
}

fn scheduler(config: SchedulerConfig) -> Scheduler {
    Scheduler::new(config, vec![EOS]).unwrap()
}

/// A prompt of `len` tokens unique to `id`, so requests share no prefix by accident.
fn prompt(id: u64, len: usize) -> Vec<TokenId> {
    (0..len).map(|i| (id * 100 + i as u64) as TokenId).collect()
}

fn request(id: u64, prompt: Vec<TokenId>, max_tokens: usize) -> NewRequest {
    NewRequest::new(RequestId(id), prompt, SamplingParams::greedy(max_tokens))
}

fn add(s: &mut Scheduler, id: u64, len: usize, max_tokens: usize) {
    s.add_request(request(id, prompt(id, len), max_tokens))
        .unwrap();
}

/// One step with a fake model that samples `token` for every request needing logits.
fn step(s: &mut Scheduler, token: TokenId) -> (ScheduledBatch, Vec<FinishedRequest>) {
    let batch = s.schedule();
    let sampled: Vec<_> = batch.sampled_ids().map(|id| (id, token)).collect();
    let finished = s.update_from_output(&batch, &sampled);
    (batch, finished)
}

/// (id, num_computed_tokens, num_new_tokens, needs_logits) of each entry.
fn plan(batch: &ScheduledBatch) -> Vec<(u64, usize, usize, bool)> {
    batch
        .requests
        .iter()
        .map(|r| {
            (
                r.id.0,
                r.num_computed_tokens,
                r.num_new_tokens,
                r.needs_logits,
            )
        })
        .collect()
}

fn blocks(ids: &[u32]) -> Vec<BlockId> {
    ids.iter().map(|&i| BlockId(i)).collect()
}

#[test]
fn a_prompt_runs_whole_then_decodes_one_token_per_step() {
    let mut s = scheduler(config(64, 4, 8));
    add(&mut s, 1, 6, 3);
    let (batch, _) = step(&mut s, 5);
    assert_eq!(plan(&batch), [(1, 0, 6, true)]);
    assert_eq!(batch.requests[0].token_ids, prompt(1, 6));
    assert_eq!(batch.requests[0].block_table, blocks(&[0, 1]));
    assert_eq!(batch.requests[0].num_cached_tokens, Some(0));
    let (batch, _) = step(&mut s, 6);
    assert_eq!(plan(&batch), [(1, 6, 1, true)]);
    assert_eq!(batch.requests[0].token_ids, [5]);
    assert_eq!(batch.requests[0].num_cached_tokens, None);
    let (_, finished) = step(&mut s, 7);
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].reason, FinishReason::Length);
    assert_eq!(finished[0].output_token_ids, [5, 6, 7]);
    assert_eq!(s.kv_cache().num_free_blocks(), 8);
    assert!(!s.has_unfinished_requests());
}

#[test]
fn the_token_budget_splits_a_long_prompt_into_chunks() {
    let mut s = scheduler(config(8, 4, 16));
    add(&mut s, 1, 20, 4);
    assert_eq!(plan(&step(&mut s, 1).0), [(1, 0, 8, false)]);
    assert_eq!(plan(&step(&mut s, 1).0), [(1, 8, 8, false)]);
    let (batch, _) = step(&mut s, 1);
    assert_eq!(plan(&batch), [(1, 16, 4, true)]);
    assert_eq!(batch.requests[0].block_table.len(), 5);
    assert_eq!(s.request(RequestId(1)).unwrap().output_token_ids(), [1]);
}

#[test]
fn the_chunk_cap_limits_one_request_even_with_budget_left() {
    let mut s = scheduler(SchedulerConfig {
        max_prefill_chunk: 6,
        ..config(100, 4, 16)
    });
    add(&mut s, 1, 14, 4);
    add(&mut s, 2, 3, 4);
    assert_eq!(
        plan(&step(&mut s, 1).0),
        [(1, 0, 6, false), (2, 0, 3, true)]
    );
    assert_eq!(
        plan(&step(&mut s, 1).0),
        [(1, 6, 6, false), (2, 3, 1, true)]
    );
    assert_eq!(
        plan(&step(&mut s, 1).0),
        [(1, 12, 2, true), (2, 4, 1, true)]
    );
}

#[test]
fn running_requests_are_served_before_waiting_ones() {
    let mut s = scheduler(config(10, 4, 16));
    add(&mut s, 1, 8, 4);
    step(&mut s, 1);
    add(&mut s, 2, 12, 4);
    let (batch, _) = step(&mut s, 1);
    // The decode of 1 comes first; 2 gets what is left of the budget.
    assert_eq!(plan(&batch), [(1, 8, 1, true), (2, 0, 9, false)]);
    assert_eq!(batch.num_batched_tokens, 10);
}

#[test]
fn waiting_requests_are_admitted_by_priority_then_arrival() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 1,
        ..config(64, 4, 16)
    });
    s.add_request(request(1, prompt(1, 4), 1).with_priority(5))
        .unwrap();
    s.add_request(request(2, prompt(2, 4), 1).with_priority(0))
        .unwrap();
    s.add_request(request(3, prompt(3, 4), 1).with_priority(0))
        .unwrap();
    let order: Vec<u64> = (0..3).map(|_| step(&mut s, 1).0.requests[0].id.0).collect();
    assert_eq!(order, [2, 3, 1]);
}

#[test]
fn max_num_seqs_caps_the_running_set() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 2,
        ..config(64, 4, 16)
    });
    for id in 1..=3 {
        add(&mut s, id, 4, 8);
    }
    let (batch, _) = step(&mut s, 1);
    assert_eq!(plan(&batch), [(1, 0, 4, true), (2, 0, 4, true)]);
    assert_eq!(s.num_running(), 2);
    assert_eq!(s.waiting_ids().collect::<Vec<_>>(), [RequestId(3)]);
}

#[test]
fn a_request_that_does_not_fit_waits_without_taking_blocks() {
    let mut s = scheduler(config(64, 4, 3));
    add(&mut s, 1, 8, 8);
    add(&mut s, 2, 8, 8);
    let (batch, _) = step(&mut s, 1);
    assert_eq!(plan(&batch), [(1, 0, 8, true)]);
    assert_eq!(s.kv_cache().num_free_blocks(), 1);
    assert_eq!(s.kv_cache().block_table(RequestId(2)), &[] as &[BlockId]);
}

/// Two requests of priority 0 and 1 admitted, then a third of priority 0; blocks run out when the
/// third needs its second block.
fn three_requests_out_of_blocks() -> (Scheduler, ScheduledBatch) {
    let mut s = scheduler(config(64, 4, 5));
    s.add_request(request(1, prompt(1, 4), 20)).unwrap();
    s.add_request(request(2, prompt(2, 4), 20).with_priority(1))
        .unwrap();
    step(&mut s, 7); // 1 and 2 prefill: blocks 0 and 1.
    s.add_request(request(3, prompt(3, 4), 20)).unwrap();
    let (batch, _) = step(&mut s, 7); // decodes take blocks 2 and 3, 3 prefills into 4.
    assert_eq!(
        plan(&batch),
        [(1, 4, 1, true), (2, 4, 1, true), (3, 0, 4, true)]
    );
    assert_eq!(s.kv_cache().num_free_blocks(), 0);
    let batch = s.schedule();
    (s, batch)
}

#[test]
fn preemption_takes_the_lowest_priority_request_even_if_not_the_newest() {
    let (s, batch) = three_requests_out_of_blocks();
    assert_eq!(batch.preempted, [RequestId(2)]);
    // 2 had been scheduled before 3 asked for a block: its entry is withdrawn.
    assert_eq!(plan(&batch), [(1, 5, 1, true), (3, 4, 1, true)]);
    assert_eq!(batch.num_batched_tokens, 2);
    assert_eq!(s.running_ids(), [RequestId(1), RequestId(3)]);
    assert_eq!(s.waiting_ids().collect::<Vec<_>>(), [RequestId(2)]);
    let preempted = s.request(RequestId(2)).unwrap();
    assert_eq!(preempted.status(), RequestStatus::Preempted);
    assert_eq!(preempted.num_computed_tokens(), 0);
    assert_eq!(preempted.output_token_ids(), [7, 7]);
    assert_eq!(s.kv_cache().block_table(RequestId(2)), &[] as &[BlockId]);
}

#[test]
fn preemption_among_equal_priorities_takes_the_most_recently_admitted() {
    let mut s = scheduler(config(64, 4, 4));
    for id in 1..=3 {
        add(&mut s, id, 4, 20);
    }
    step(&mut s, 7); // Blocks 0, 1, 2.
    let batch = s.schedule(); // 1 takes block 3; 2 finds none and 3 is preempted.
    assert_eq!(batch.preempted, [RequestId(3)]);
    assert_eq!(plan(&batch), [(1, 4, 1, true), (2, 4, 1, true)]);
    assert_eq!(s.kv_cache().block_table(RequestId(2)), blocks(&[1, 2]));
}

#[test]
fn a_preempted_request_resumes_by_recomputing_prompt_and_output() {
    let (mut s, batch) = three_requests_out_of_blocks();
    let sampled: Vec<_> = batch.sampled_ids().map(|id| (id, 7)).collect();
    s.update_from_output(&batch, &sampled);
    s.abort(RequestId(1));
    let (batch, _) = step(&mut s, 8);
    let resumed = batch.get(RequestId(2)).unwrap();
    // Prompt (4) + output (2): the first full block comes back from the prefix cache.
    assert_eq!(resumed.num_cached_tokens, Some(4));
    assert_eq!(resumed.num_computed_tokens, 4);
    assert_eq!(resumed.token_ids, [7, 7]);
    assert!(resumed.needs_logits);
    assert_eq!(
        s.request(RequestId(2)).unwrap().output_token_ids(),
        [7, 7, 8]
    );
    assert_eq!(s.request(RequestId(2)).unwrap().num_preemptions(), 1);
}

#[test]
fn abort_frees_the_blocks_of_a_running_request() {
    let mut s = scheduler(config(64, 4, 8));
    add(&mut s, 1, 10, 8);
    step(&mut s, 1);
    assert_eq!(s.kv_cache().num_free_blocks(), 5);
    let aborted = s.abort(RequestId(1)).unwrap();
    assert_eq!(aborted.reason, FinishReason::Abort);
    assert_eq!(s.kv_cache().num_free_blocks(), 8);
    assert_eq!(s.num_running(), 0);
    assert!(s.abort(RequestId(1)).is_none());
}

#[test]
fn abort_removes_a_waiting_request_from_the_queue() {
    let mut s = scheduler(config(64, 4, 8));
    add(&mut s, 1, 4, 8);
    s.abort(RequestId(1));
    assert_eq!(s.num_waiting(), 0);
    assert!(s.schedule().is_empty());
}

#[test]
fn aborting_between_schedule_and_update_skips_the_request() {
    let mut s = scheduler(config(64, 4, 8));
    add(&mut s, 1, 4, 8);
    let batch = s.schedule();
    s.abort(RequestId(1));
    assert!(s
        .update_from_output(&batch, &[(RequestId(1), 3)])
        .is_empty());
    assert_eq!(s.kv_cache().num_free_blocks(), 8);
}

#[test]
fn a_prefix_hit_computes_only_the_new_tokens_and_reports_cached_ones() {
    let mut s = scheduler(config(64, 4, 16));
    let shared: Vec<TokenId> = (0..8).collect();
    let mut first = shared.clone();
    first.extend([50, 51]);
    s.add_request(request(1, first, 1)).unwrap();
    let (batch, _) = step(&mut s, 1);
    let first_blocks = batch.requests[0].block_table.clone();
    let mut second = shared.clone();
    second.extend([60, 61, 62, 63]);
    s.add_request(request(2, second, 1)).unwrap();
    let (batch, finished) = step(&mut s, 1);
    assert_eq!(plan(&batch), [(2, 8, 4, true)]);
    assert_eq!(batch.requests[0].num_cached_tokens, Some(8));
    assert_eq!(batch.requests[0].token_ids, [60, 61, 62, 63]);
    assert_eq!(batch.requests[0].block_table[..2], first_blocks[..2]);
    assert_eq!(finished[0].num_cached_tokens, 8);
    let stats = s.kv_cache().prefix_cache_stats();
    assert_eq!(
        (stats.queries, stats.queried_tokens, stats.hit_tokens),
        (2, 22, 8)
    );
}

#[test]
fn a_fully_cached_prompt_still_computes_its_last_block() {
    let mut s = scheduler(config(64, 4, 16));
    s.add_request(request(1, prompt(1, 8), 1)).unwrap();
    step(&mut s, 1);
    s.add_request(request(2, prompt(1, 8), 1)).unwrap();
    let (batch, _) = step(&mut s, 1);
    assert_eq!(plan(&batch), [(2, 4, 4, true)]);
}

#[test]
fn different_cache_salts_never_hit_each_others_prefix() {
    let mut s = scheduler(config(64, 4, 16));
    s.add_request(request(1, prompt(1, 9), 1).with_cache_salt(CacheSalt::new("a")))
        .unwrap();
    step(&mut s, 1);
    s.add_request(request(2, prompt(1, 9), 1).with_cache_salt(CacheSalt::new("b")))
        .unwrap();
    s.add_request(request(3, prompt(1, 9), 1).with_cache_salt(CacheSalt::new("a")))
        .unwrap();
    let (batch, _) = step(&mut s, 1);
    assert_eq!(batch.get(RequestId(2)).unwrap().num_cached_tokens, Some(0));
    assert_eq!(batch.get(RequestId(3)).unwrap().num_cached_tokens, Some(8));
}

#[test]
fn eos_finishes_a_request_with_stop_and_frees_its_blocks() {
    let mut s = scheduler(config(64, 4, 8));
    add(&mut s, 1, 5, 10);
    let (_, finished) = step(&mut s, EOS);
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0].reason, FinishReason::Stop);
    assert_eq!(finished[0].output_token_ids, [EOS]);
    assert_eq!(s.kv_cache().num_free_blocks(), 8);
}

#[test]
fn finish_for_a_stop_string_frees_the_blocks() {
    let mut s = scheduler(config(64, 4, 8));
    add(&mut s, 1, 5, 10);
    step(&mut s, 3);
    let finished = s.finish(RequestId(1), FinishReason::Stop).unwrap();
    assert_eq!(finished.output_token_ids, [3]);
    assert_eq!(s.kv_cache().num_free_blocks(), 8);
}

#[test]
fn a_forked_child_shares_the_full_prompt_blocks_and_recomputes_the_tail() {
    let mut s = scheduler(config(64, 4, 16));
    add(&mut s, 1, 10, 4);
    step(&mut s, 1);
    s.fork_request(RequestId(1), RequestId(2), SamplingParams::greedy(4), None)
        .unwrap();
    let parent_table = s.kv_cache().block_table(RequestId(1)).to_vec();
    assert_eq!(s.kv_cache().block_table(RequestId(2)), &parent_table[..2]);
    assert_eq!(s.kv_cache().pool().ref_count(parent_table[0]), 2);
    assert_eq!(s.kv_cache().pool().ref_count(parent_table[2]), 1);
    let (batch, _) = step(&mut s, 2);
    assert_eq!(plan(&batch), [(1, 10, 1, true), (2, 8, 2, true)]);
    assert_eq!(batch.requests[1].token_ids, prompt(1, 10)[8..]);
    assert_eq!(s.request(RequestId(2)).unwrap().output_token_ids(), [2]);
}

#[test]
fn invalid_requests_are_rejected_with_a_reason() {
    let mut s = scheduler(config(64, 4, 4));
    add(&mut s, 1, 4, 1);
    assert_eq!(
        s.add_request(request(1, prompt(1, 4), 1)),
        Err(EngineError::DuplicateRequest(RequestId(1)))
    );
    assert_eq!(
        s.add_request(request(2, vec![], 1)),
        Err(EngineError::EmptyPrompt)
    );
    assert_eq!(
        s.add_request(request(3, prompt(3, 16), 1)),
        Err(EngineError::PromptTooLong {
            num_tokens: 16,
            max_tokens: 15
        })
    );
    let bad = NewRequest::new(
        RequestId(4),
        prompt(4, 2),
        SamplingParams {
            top_p: 0.0,
            ..SamplingParams::default()
        },
    );
    let err = s.add_request(bad).unwrap_err();
    assert!(matches!(err, EngineError::InvalidSampling(ref e) if e.field == "top_p"));
}

#[test]
fn the_context_limit_is_capped_by_the_kv_cache_size() {
    let mut s = scheduler(SchedulerConfig {
        max_model_len: 100,
        ..config(64, 4, 2)
    });
    add(&mut s, 1, 6, 100);
    step(&mut s, 1);
    let (_, finished) = step(&mut s, 1);
    assert_eq!(finished[0].reason, FinishReason::Length);
    assert_eq!(finished[0].output_token_ids.len(), 2);
}

#[test]
fn the_default_config_is_valid() {
    assert!(Scheduler::new(SchedulerConfig::default(), vec![EOS]).is_ok());
    let bad = SchedulerConfig {
        block_size: 0,
        ..SchedulerConfig::default()
    };
    assert!(matches!(
        Scheduler::new(bad, vec![]),
        Err(EngineError::InvalidConfig {
            field: "block_size",
            ..
        })
    ));
}

/// Samples `steps` tokens for request 1 (seed 11, temperature 1), with `others` unseeded
/// requests sharing every batch.
fn seeded_tokens(others: u64, steps: usize) -> Vec<TokenId> {
    let mut s = scheduler(config(256, 4, 64));
    let params = SamplingParams {
        seed: Some(11),
        max_tokens: Some(steps),
        ..SamplingParams::default()
    };
    s.add_request(NewRequest::new(RequestId(1), prompt(1, 5), params))
        .unwrap();
    for id in 2..2 + others {
        let params = SamplingParams {
            max_tokens: Some(steps),
            ..SamplingParams::default()
        };
        s.add_request(NewRequest::new(RequestId(id), prompt(id, 3), params))
            .unwrap();
    }
    let mut sampler = Sampler::new();
    let mut tokens = Vec::new();
    while s.has_unfinished_requests() {
        let batch = s.schedule();
        let mut sampled = Vec::new();
        let ids: Vec<RequestId> = batch.sampled_ids().collect();
        for (&id, input) in ids.iter().zip(s.sample_inputs(&ids)) {
            let mut logits: Vec<f32> = (0..32).map(|t| (t % 5) as f32 * 0.5).collect();
            let token = sampler.sample(&mut logits, input.unwrap()).token;
            if id == RequestId(1) {
                tokens.push(token);
            }
            sampled.push((id, token));
        }
        s.update_from_output(&batch, &sampled);
    }
    tokens
}

#[test]
fn a_seeded_request_samples_the_same_tokens_whatever_shares_its_batch() {
    let alone = seeded_tokens(0, 6);
    assert_eq!(alone.len(), 6);
    assert_eq!(seeded_tokens(3, 6), alone);
}

// Fair sharing between tenants.

fn tenant_request(id: u64, tenant: &str, len: usize, max_tokens: usize) -> NewRequest {
    request(id, prompt(id, len), max_tokens).with_tenant(TenantKey::new(tenant))
}

fn add_for(s: &mut Scheduler, tenant: &str, ids: impl IntoIterator<Item = u64>, len: usize) {
    for id in ids {
        s.add_request(tenant_request(id, tenant, len, 50)).unwrap();
    }
}

fn ids_of(batch: &ScheduledBatch) -> Vec<u64> {
    batch.requests.iter().map(|r| r.id.0).collect()
}

#[test]
fn a_new_tenant_runs_in_the_next_step_although_another_fills_every_slot() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 64,
        ..config(2048, 4, 4096)
    });
    add_for(&mut s, "a", 1..=300, 4);
    step(&mut s, 7);
    step(&mut s, 7);
    assert_eq!(s.num_running(), 64);
    assert_eq!(s.num_waiting(), 236);
    s.add_request(tenant_request(1000, "b", 4, 50)).unwrap();
    let (batch, _) = step(&mut s, 7);
    // B prefills now; A's most recently admitted sequence makes room and waits at its place.
    assert_eq!(batch.get(RequestId(1000)).unwrap().num_new_tokens, 4);
    assert_eq!(batch.preempted, [RequestId(64)]);
    assert_eq!(batch.requests.len(), 64);
    assert_eq!(s.num_running(), 64);
    assert_eq!(
        s.request(RequestId(64)).unwrap().status(),
        RequestStatus::Preempted
    );
    assert_eq!(s.waiting_ids().next(), Some(RequestId(64)));
    // B keeps its slot: A, holding 63, cannot take it back.
    let (batch, _) = step(&mut s, 7);
    assert!(batch.preempted.is_empty());
    assert_eq!(batch.get(RequestId(1000)).unwrap().num_new_tokens, 1);
}

#[test]
fn waiting_requests_are_admitted_tenant_by_tenant() {
    let mut s = scheduler(config(64, 4, 64));
    add_for(&mut s, "a", 1..=3, 4);
    add_for(&mut s, "b", 4..=6, 4);
    add(&mut s, 7, 4, 50); // The anonymous tenant, a group of its own.
    let expected = [1, 4, 7, 2, 5, 3, 6];
    let order: Vec<u64> = s.waiting_ids().map(|id| id.0).collect();
    assert_eq!(order, expected);
    let (batch, _) = step(&mut s, 7);
    assert_eq!(ids_of(&batch), expected);
}

#[test]
fn with_one_tenant_admission_is_first_come_first_served() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 2,
        ..config(64, 4, 64)
    });
    add_for(&mut s, "a", [3, 1, 2], 4);
    let (batch, _) = step(&mut s, 7);
    assert_eq!(ids_of(&batch), [3, 1]);
    assert_eq!(s.waiting_ids().collect::<Vec<_>>(), [RequestId(2)]);
}

#[test]
fn a_tenant_holding_a_single_slot_is_not_preempted_for_another() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 1,
        ..config(64, 4, 64)
    });
    s.add_request(tenant_request(1, "a", 4, 2)).unwrap();
    step(&mut s, 7);
    s.add_request(tenant_request(2, "b", 4, 2)).unwrap();
    let (batch, finished) = step(&mut s, 7);
    assert_eq!(ids_of(&batch), [1]);
    assert!(batch.preempted.is_empty());
    assert_eq!(finished[0].id, RequestId(1));
    assert_eq!(ids_of(&step(&mut s, 7).0), [2]);
}

#[test]
fn a_freed_slot_goes_to_the_tenant_running_least() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 4,
        ..config(256, 4, 256)
    });
    add_for(&mut s, "a", 1..=5, 4);
    step(&mut s, 7);
    add_for(&mut s, "b", 10..=12, 4);
    let (batch, _) = step(&mut s, 7);
    assert_eq!(batch.preempted, [RequestId(4)]);
    assert_eq!(s.running_ids(), [1, 2, 3, 10].map(RequestId));
    // Full, and nobody is starving: nothing moves.
    let (batch, _) = step(&mut s, 7);
    assert!(batch.preempted.is_empty());
    assert_eq!(ids_of(&batch), [1, 2, 3, 10]);
    // A holds 2 after this, B holds 1: B's next request takes the slot, although A's
    // preempted one arrived first.
    s.abort(RequestId(1));
    let (batch, _) = step(&mut s, 7);
    assert_eq!(ids_of(&batch), [2, 3, 10, 11]);
}

#[test]
fn under_block_pressure_the_tenant_holding_most_gives_way() {
    let mut s = scheduler(config(64, 4, 5));
    add_for(&mut s, "a", 1..=2, 4);
    step(&mut s, 7); // Blocks 0 and 1.
    s.add_request(tenant_request(3, "b", 4, 50)).unwrap();
    step(&mut s, 7); // The decodes take blocks 2 and 3, B prefills into 4.
    assert_eq!(s.kv_cache().num_free_blocks(), 0);
    let batch = s.schedule();
    // B is the most recently admitted, but A holds two sequences.
    assert_eq!(batch.preempted, [RequestId(2)]);
    assert_eq!(plan(&batch), [(1, 5, 1, true), (3, 4, 1, true)]);
}

#[test]
fn a_starving_tenant_gets_budget_that_running_prefills_would_take() {
    let mut s = scheduler(SchedulerConfig {
        max_prefill_chunk: 8,
        ..config(8, 4, 64)
    });
    s.add_request(tenant_request(1, "a", 40, 4)).unwrap();
    assert_eq!(plan(&step(&mut s, 7).0), [(1, 0, 8, false)]);
    s.add_request(tenant_request(2, "b", 4, 4)).unwrap();
    // Half the step is held back for B's first chunk.
    assert_eq!(
        plan(&step(&mut s, 7).0),
        [(1, 8, 4, false), (2, 0, 4, true)]
    );
    assert_eq!(s.request(RequestId(2)).unwrap().output_token_ids(), [7]);
    // Nobody is starving any more: running requests take the whole budget in admission order.
    assert_eq!(plan(&step(&mut s, 7).0), [(1, 12, 8, false)]);
}

#[test]
fn a_higher_priority_class_still_goes_first_whatever_the_tenants() {
    let mut s = scheduler(SchedulerConfig {
        max_num_seqs: 1,
        ..config(64, 4, 64)
    });
    s.add_request(tenant_request(1, "a", 4, 1).with_priority(1))
        .unwrap();
    s.add_request(tenant_request(2, "a", 4, 1)).unwrap();
    s.add_request(tenant_request(3, "b", 4, 1).with_priority(1))
        .unwrap();
    let order: Vec<u64> = (0..3).map(|_| step(&mut s, 1).0.requests[0].id.0).collect();
    assert_eq!(order, [2, 1, 3]);
}

#[test]
fn forced_tokens_are_computed_in_the_next_step_and_respect_max_tokens() {
    let mut s = scheduler(config(64, 4, 16));
    add(&mut s, 1, 5, 6);
    step(&mut s, 9); // prefill, samples 9
    assert_eq!(s.append_forced(RequestId(1), &[20, 21, 22]), (3, None));
    let (batch, _) = step(&mut s, 30);
    let entry = batch.get(RequestId(1)).unwrap();
    // The sampled token and the three forced ones, in one chunk with logits at its end.
    assert_eq!(entry.token_ids, [9, 20, 21, 22]);
    assert!(entry.needs_logits);
    assert_eq!(
        s.request(RequestId(1)).unwrap().output_token_ids(),
        [9, 20, 21, 22, 30]
    );
    // One more token is all `max_tokens` (6) leaves: the rest is not appended.
    let (appended, done) = s.append_forced(RequestId(1), &[40, 41, 42]);
    assert_eq!(appended, 1);
    let done = done.unwrap();
    assert_eq!(done.reason, FinishReason::Length);
    assert_eq!(done.output_token_ids, [9, 20, 21, 22, 30, 40]);
    assert_eq!(s.kv_cache().num_free_blocks(), 16);
    assert_eq!(s.append_forced(RequestId(1), &[1]), (0, None));
}

#[test]
fn sample_inputs_follow_the_ids_and_skip_unknown_and_repeated_ones() {
    let mut s = scheduler(config(256, 4, 64));
    add(&mut s, 1, 3, 4);
    add(&mut s, 2, 5, 4);
    let ids = [RequestId(2), RequestId(9), RequestId(1), RequestId(2)];
    let inputs = s.sample_inputs(&ids);
    let prompts: Vec<Option<usize>> = inputs
        .iter()
        .map(|input| input.as_ref().map(|i| i.prompt.len()))
        .collect();
    // Request 2 is listed twice: only its last place gets it (one RNG, one borrower).
    assert_eq!(prompts, [None, None, Some(3), Some(5)]);
    assert!(inputs.iter().flatten().all(|i| i.allowed.is_none()));
}
