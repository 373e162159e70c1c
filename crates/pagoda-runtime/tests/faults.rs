//! The engine loop survives a panic: with the `fault-injection` hooks (turned on by this
//! crate's dev-dependency on itself), a prompt holding the poison token makes a step, a
//! sampling call or the loop itself panic, and the other requests must not notice.

mod common;

use common::*;
use pagoda_runtime::{EngineHandle, FinishReason, RuntimeError};

/// The poison token: in the vocabulary, absent from the normal prompt.
fn poison(engine: &EngineHandle) -> u32 {
    let token = engine.info().vocab_size as u32 - 1;
    assert!(!prompt(engine).contains(&token));
    token
}

fn poisoned_prompt(engine: &EngineHandle) -> Vec<u32> {
    let mut p = prompt(engine);
    p.push(poison(engine));
    p
}

/// The final outputs' errors of a request, one per choice.
fn error_of(done: &Finished) -> Option<String> {
    done.completion(0).error.clone()
}

#[test]
fn a_panicking_step_fails_its_request_and_the_engine_goes_on() {
    let probe = engine(|_| {});
    let poison = poison(&probe);
    drop(probe);
    // One running sequence at a time: the poisoned request gets a step of its own.
    let engine = engine(|c| {
        c.max_num_seqs = 1;
        c.faults.panic_step_on_token = Some(poison);
    });
    let normal = prompt(&engine);
    let expected = collect(
        engine
            .submit(request(normal.clone(), greedy(30), None))
            .unwrap(),
    );
    assert_eq!(expected.completion(0).error, None);

    let mut concurrent = engine
        .submit(request(normal.clone(), greedy(30), None))
        .unwrap();
    let first = concurrent.blocking_next().unwrap();
    let poisoned = engine
        .submit(request(poisoned_prompt(&engine), greedy(30), None))
        .unwrap();

    let poisoned = collect(poisoned);
    let failed = poisoned.completion(0);
    assert_eq!(failed.finish_reason, FinishReason::Abort);
    let error = failed.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("fault injection: the step panics"),
        "{error}"
    );
    assert!(poisoned.token_ids(0).is_empty());

    let mut rest = collect(concurrent);
    rest.outputs.insert(0, first);
    assert_eq!(rest.completion(0).error, None);
    assert_eq!(rest.completion(0).finish_reason, FinishReason::Length);
    assert_eq!(rest.token_ids(0), expected.token_ids(0));

    let later = collect(engine.submit(request(normal, greedy(30), None)).unwrap());
    assert_eq!(later.completion(0).error, None);
    assert_eq!(later.token_ids(0), expected.token_ids(0));
    wait_until_idle(&engine);
    assert!(engine.is_alive());
}

#[test]
fn a_panic_while_sampling_fails_only_that_request_of_the_step() {
    let probe = engine(|_| {});
    let poison = poison(&probe);
    drop(probe);
    let engine = engine(|c| c.faults.panic_sampling_on_token = Some(poison));
    let normal = prompt(&engine);
    let expected = collect(
        engine
            .submit(request(normal.clone(), greedy(24), None))
            .unwrap(),
    );

    // Both run in the same steps; only the poisoned one fails.
    let mut neighbour = engine
        .submit(request(normal.clone(), greedy(24), None))
        .unwrap();
    let first = neighbour.blocking_next().unwrap();
    let mut params = greedy(24);
    params.n = 3;
    let poisoned = collect(
        engine
            .submit(request(poisoned_prompt(&engine), params, None))
            .unwrap(),
    );
    for index in 0..3 {
        let failed = poisoned.completion(index);
        assert_eq!(failed.finish_reason, FinishReason::Abort);
        let error = failed.error.as_deref().unwrap_or_default();
        assert!(error.contains("sampling"), "{error}");
    }
    let mut rest = collect(neighbour);
    rest.outputs.insert(0, first);
    assert_eq!(error_of(&rest), None);
    assert_eq!(rest.token_ids(0), expected.token_ids(0));
    wait_until_idle(&engine);
    assert!(engine.is_alive());
    assert_eq!(engine.stats().num_used_blocks(), 0);
}

#[test]
fn if_the_loop_dies_every_open_stream_ends_with_an_error() {
    let probe = engine(|_| {});
    let poison = poison(&probe);
    drop(probe);
    let engine = engine(|c| c.faults.kill_loop_on_token = Some(poison));
    let mut params = greedy(400);
    params.n = 2;
    let mut open = engine
        .submit(request(prompt(&engine), params, None))
        .unwrap();
    assert!(open.blocking_next().unwrap().finished.is_none());
    let killer = engine
        .submit(request(poisoned_prompt(&engine), greedy(4), None))
        .unwrap();

    // Both choices of the running request end with an error, not a silently closed stream.
    let mut rest = collect(open);
    rest.outputs.retain(|o| o.finished.is_some());
    assert_eq!(rest.outputs.len(), 2);
    for out in &rest.outputs {
        let completion = out.finished.as_ref().unwrap();
        assert_eq!(completion.finish_reason, FinishReason::Abort);
        let error = completion.error.as_deref().unwrap_or_default();
        assert!(error.contains("the engine stopped"), "{error}");
    }
    let killer = collect(killer);
    assert!(error_of(&killer).is_some());

    wait_for(&engine, "report itself dead", |e| !e.is_alive());
    let refused = engine.submit(request(prompt(&engine), greedy(4), None));
    assert!(matches!(refused, Err(RuntimeError::EngineStopped)));
    wait_for(&engine, "release every pending place", |e| {
        e.num_in_flight() == 0
    });
}
