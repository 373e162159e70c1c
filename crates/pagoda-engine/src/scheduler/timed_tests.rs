//! Steps sized by time, with a fake cost model and a fake clock (step times computed from a
//! model instead of measured).

use super::*;
use crate::sampling::SamplingParams;

const EOS: TokenId = 999;

/// 10 ms per step, 1 ms per token, 0.5 ms per sampled row, 0.001 ms per attended key.
fn fake_model() -> StepCostModel {
    StepCostModel {
        base_ms: 10.0,
        per_token_ms: 1.0,
        per_sampled_ms: 0.5,
        per_attended_ms: 0.001,
    }
}

fn config(target_ms: Option<u32>, floor: usize) -> SchedulerConfig {
    SchedulerConfig {
        max_num_batched_tokens: 2048,
        max_num_seqs: 64,
        max_prefill_chunk: 1024,
        block_size: 16,
        num_blocks: 512,
        max_model_len: 4096,
        sampling_seed: Some(0),
        target_itl_ms: target_ms,
        min_prefill_tokens: floor,
        ..SchedulerConfig::default()
    }
}

fn timed(target_ms: u32, floor: usize) -> Scheduler {
    let mut s = Scheduler::new(config(Some(target_ms), floor), vec![EOS]).unwrap();
    s.set_step_cost_model(fake_model());
    s
}

fn request(id: u64, len: usize, max_tokens: usize) -> NewRequest {
    let prompt = (0..len)
        .map(|i| (id * 10_000 + i as u64) as TokenId)
        .collect();
    NewRequest::new(RequestId(id), prompt, SamplingParams::greedy(max_tokens))
}

fn add(s: &mut Scheduler, id: u64, len: usize, max_tokens: usize) {
    s.add_request(request(id, len, max_tokens)).unwrap();
}

fn step(s: &mut Scheduler) -> ScheduledBatch {
    let batch = s.schedule();
    let sampled: Vec<_> = batch.sampled_ids().map(|id| (id, 7)).collect();
    s.update_from_output(&batch, &sampled);
    batch
}

/// Prompt tokens in a step (entries with more than one token, or a first admission).
fn prefill_tokens(batch: &ScheduledBatch) -> usize {
    batch
        .requests
        .iter()
        .filter(|r| r.num_new_tokens > 1 || r.num_cached_tokens.is_some())
        .map(|r| r.num_new_tokens)
        .sum()
}

fn decodes(batch: &ScheduledBatch) -> usize {
    batch.requests.len()
        - batch
            .requests
            .iter()
            .filter(|r| r.num_new_tokens > 1)
            .count()
}

/// Starts `n` requests with short prompts and runs them until all decode.
fn start_decoders(s: &mut Scheduler, n: u64, max_tokens: usize) {
    for id in 1..=n {
        add(s, id, 8, max_tokens);
    }
    for _ in 0..100 {
        let batch = step(s);
        if s.num_waiting() == 0 && batch.requests.iter().all(|r| r.num_computed_tokens >= 8) {
            return;
        }
    }
    panic!(
        "{n} requests did not start: {} waiting, {} running",
        s.num_waiting(),
        s.num_running()
    );
}

#[test]
fn a_step_stays_under_the_target_when_the_decodes_fit() {
    let mut s = timed(60, 0);
    start_decoders(&mut s, 8, 400);
    add(&mut s, 100, 1500, 4);
    let model = fake_model();
    let mut prompt_done = 0;
    while prompt_done < 1500 {
        let batch = step(&mut s);
        let planned = model.predict_ms(&StepShape::of(&batch));
        assert!(planned <= 60.0, "planned {planned} ms: {batch:?}");
        assert_eq!(decodes(&batch), 8, "every decode runs every step");
        let progress = prefill_tokens(&batch);
        assert!(progress > 0, "the prompt must progress while time is left");
        prompt_done += progress;
    }
    // 60 - 10 base - 8 decodes (1.5 ms + keys each) leaves ~40 ms: the prompt took many
    // steps, not one 1500-token step of 1.5 s.
    assert!(s.request(RequestId(100)).unwrap().num_computed_tokens() >= 1500);
}

#[test]
fn without_a_target_steps_are_sized_by_tokens() {
    let mut s = Scheduler::new(config(None, 0), vec![EOS]).unwrap();
    s.set_step_cost_model(fake_model());
    start_decoders(&mut s, 8, 400);
    add(&mut s, 100, 1500, 4);
    let batch = step(&mut s);
    assert_eq!(
        prefill_tokens(&batch),
        1024,
        "the chunk cap, whatever the time"
    );
}

#[test]
fn prefill_gets_the_floor_when_decodes_fill_the_step() {
    // 40 decodes alone take 10 + 40 * 1.5 = 70 ms, over the 50 ms target.
    let mut s = timed(50, 16);
    start_decoders(&mut s, 40, 400);
    add(&mut s, 100, 100, 4);
    for round in 0..5 {
        let batch = step(&mut s);
        assert_eq!(decodes(&batch), 40);
        assert_eq!(prefill_tokens(&batch), 16, "round {round}");
    }
    // With no floor the prompt would wait for the decodes to finish (they start while steps
    // cost nothing).
    let mut s = timed(50, 0);
    s.set_step_cost_model(StepCostModel::default());
    start_decoders(&mut s, 40, 400);
    s.set_step_cost_model(fake_model());
    add(&mut s, 100, 100, 4);
    assert_eq!(prefill_tokens(&step(&mut s)), 0);
    assert_eq!(s.num_waiting(), 1);
}

#[test]
fn an_interactive_prompt_is_prefilled_ahead_of_a_batch_prompt() {
    // Time for ~40 prompt tokens per step: one prompt at a time.
    let mut s = timed(50, 0);
    s.add_request(request(1, 400, 4).with_priority(10)).unwrap();
    step(&mut s);
    assert!(s.request(RequestId(1)).unwrap().num_computed_tokens() > 0);
    // The batch prompt is mid-prefill when an interactive one arrives: the newcomer goes first.
    s.add_request(request(2, 100, 4).with_priority(0)).unwrap();
    let batch = step(&mut s);
    assert_eq!(batch.requests[0].id, RequestId(2), "{batch:?}");
    assert!(batch.requests[0].num_new_tokens >= 30);
    let total: usize = batch.requests.iter().map(|r| r.num_new_tokens).sum();
    assert!(fake_model().predict_ms(&StepShape::of(&batch)) <= 50.0);
    assert!(total >= 30);
    // Until it is done, the batch prompt only gets what is left over.
    while s.request(RequestId(2)).unwrap().num_computed_tokens() < 100 {
        let batch = step(&mut s);
        assert_eq!(batch.requests[0].id, RequestId(2));
    }
}

#[test]
fn waiting_prompts_are_admitted_by_priority_within_the_time() {
    let mut s = timed(50, 0);
    s.add_request(request(1, 300, 4).with_priority(10)).unwrap();
    s.add_request(request(2, 300, 4).with_priority(0)).unwrap();
    let batch = step(&mut s);
    assert_eq!(
        batch.requests.len(),
        1,
        "time for one chunk only: {batch:?}"
    );
    assert_eq!(batch.requests[0].id, RequestId(2));
}

#[test]
fn a_request_target_applies_while_it_runs() {
    let mut s = Scheduler::new(config(None, 0), vec![EOS]).unwrap();
    s.set_step_cost_model(fake_model());
    s.add_request(request(1, 8, 50).with_itl_target_ms(30))
        .unwrap();
    step(&mut s);
    add(&mut s, 2, 600, 4);
    let batch = step(&mut s);
    assert!(fake_model().predict_ms(&StepShape::of(&batch)) <= 30.0);
    assert!(prefill_tokens(&batch) > 0);
    // Once it is gone, steps are sized by tokens again.
    s.abort(RequestId(1));
    let batch = step(&mut s);
    assert!(prefill_tokens(&batch) > 100, "{batch:?}");
}

#[test]
fn preemption_still_frees_blocks_for_timed_steps() {
    // 6 blocks of 16 tokens: three 20-token requests growing to 40 tokens cannot all fit.
    let mut s = Scheduler::new(
        SchedulerConfig {
            num_blocks: 6,
            ..config(Some(40), 4)
        },
        vec![EOS],
    )
    .unwrap();
    s.set_step_cost_model(fake_model());
    for id in 1..=3 {
        add(&mut s, id, 20, 20);
    }
    let mut preempted = 0;
    let mut steps = 0;
    while s.has_unfinished_requests() {
        let batch = step(&mut s);
        preempted += batch.preempted.len();
        steps += 1;
        assert!(steps < 1000, "no progress");
    }
    assert!(preempted > 0, "the cache was too small to hold all three");
    assert_eq!(s.kv_cache().num_free_blocks(), 6);
}

#[test]
fn the_first_steps_prefill_little_until_a_model_is_fitted() {
    let mut s = Scheduler::new(config(Some(50), 0), vec![EOS]).unwrap();
    add(&mut s, 1, 1000, 4);
    let batch = step(&mut s);
    assert_eq!(prefill_tokens(&batch), timed::COLD_START_PREFILL_TOKENS[0]);
    assert_eq!(s.step_cost_model(), None);
}

#[test]
fn the_fitted_model_sizes_steps_from_measured_times() {
    // The fake clock: each step "takes" what the fake model says.
    let model = fake_model();
    let mut s = Scheduler::new(config(Some(60), 0), vec![EOS]).unwrap();
    start_decoders(&mut s, 4, 500);
    add(&mut s, 100, 3000, 4);
    let mut over = 0;
    for round in 0..60 {
        let batch = s.schedule();
        let took = model.predict_ms(&StepShape::of(&batch));
        if round >= 10 && took > 60.0 + 1e-9 {
            over += 1;
        }
        let sampled: Vec<_> = batch.sampled_ids().map(|id| (id, 7)).collect();
        s.update_from_output(&batch, &sampled);
        s.record_step_time(&batch, std::time::Duration::from_secs_f64(took / 1e3));
    }
    let fitted = s.step_cost_model().expect("fitted by now");
    assert!((fitted.per_token_ms - 1.0).abs() < 0.05, "{fitted:?}");
    assert_eq!(over, 0, "steps after warm-up stay under the target");
}
