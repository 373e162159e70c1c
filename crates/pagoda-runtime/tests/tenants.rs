//! Pending work is bounded per tenant, and a tenant arriving while another floods the engine is
//! scheduled in the very next step.

mod common;

use common::*;
use pagoda_runtime::{RuntimeError, TenantKey};

#[test]
fn a_tenant_over_its_share_is_refused_while_others_still_get_in() {
    let engine = engine(|c| {
        c.max_pending_requests = 8;
        c.max_pending_per_tenant = 4;
    });
    let p = prompt(&engine);
    let mut wide = greedy(400);
    wide.n = 4;
    let a = engine
        .submit(request(p.clone(), wide.clone(), Some("a")))
        .unwrap();
    let refused = engine.submit(request(p.clone(), greedy(4), Some("a")));
    assert!(matches!(
        refused,
        Err(RuntimeError::TenantQueueFull { limit: 4 })
    ));
    let b = engine.submit(request(p.clone(), wide, Some("b"))).unwrap();
    assert_eq!(engine.num_in_flight_for(Some(&TenantKey::new("a"))), 4);
    // Each tenant within its share, but the engine is full.
    let refused = engine.submit(request(p.clone(), greedy(4), None));
    assert!(matches!(refused, Err(RuntimeError::QueueFull { limit: 8 })));
    drop((a, b));
    wait_until_idle(&engine);
    let again = collect(engine.submit(request(p, greedy(4), Some("a"))).unwrap());
    assert_eq!(again.completion(0).error, None);
    // The place is given back before the final output is sent: reading it and submitting
    // again never hits the request's own place.
    assert_eq!(engine.num_in_flight_for(Some(&TenantKey::new("a"))), 0);
}

#[test]
fn more_choices_than_a_tenants_share_is_a_bad_request_not_a_busy_engine() {
    let engine = engine(|c| {
        c.max_pending_requests = 8;
        c.max_pending_per_tenant = 4;
    });
    let mut params = greedy(4);
    params.n = 5;
    let err = engine
        .submit(request(prompt(&engine), params, Some("a")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`n`") && err.contains("at most 4"), "{err}");
}

#[test]
fn a_huge_max_tokens_is_a_context_overflow_not_a_wrap() {
    let engine = engine(|_| {});
    let mut params = greedy(4);
    params.max_tokens = Some(usize::MAX);
    let err = engine.submit(request(prompt(&engine), params, None));
    assert!(matches!(err, Err(RuntimeError::ContextOverflow { .. })));
}

#[test]
fn a_tenant_arriving_during_a_flood_is_scheduled_in_the_next_step() {
    let engine = engine(|c| c.max_num_seqs = 4);
    let p = prompt(&engine);
    let mut flood = greedy(60);
    flood.n = 16;
    let mut a = engine.submit(request(p.clone(), flood, Some("a"))).unwrap();
    // A fills every slot before B arrives. Stats are published after a step's outputs are
    // sent, so wait for them rather than read them once.
    assert!(a.blocking_next().unwrap().finished.is_none());
    wait_for(&engine, "run A in every slot", |e| {
        e.stats().num_running == 4
    });
    let b = collect(engine.submit(request(p, greedy(8), Some("b"))).unwrap());
    let timings = b.completion(0).timings;
    assert_eq!(timings.steps_waited, 0, "{timings:?}");
    assert_eq!(b.token_ids(0).len(), 8);

    let mut waited = Vec::new();
    while let Some(out) = a.blocking_next() {
        if let Some(done) = out.finished {
            assert_eq!(done.error, None);
            waited.push(done.timings.steps_waited);
        }
    }
    assert_eq!(waited.len(), 16);
    // A's own choices queued behind each other: the count measures real waiting.
    assert!(waited.iter().any(|&w| w > 10), "{waited:?}");
    wait_until_idle(&engine);
}
