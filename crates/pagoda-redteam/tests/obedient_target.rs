//! The runner against the deliberately obedient target: every attack should succeed, and
//! with the pagoda-guard pipeline in front of the same target, few should.

use std::sync::Arc;

use pagoda_guard::{Guard, Policies};
use pagoda_redteam::{builtin, run, RunConfig};

async fn start(guard: Option<Arc<Guard>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(pagoda_redteam::obedient::serve(listener, guard));
    format!("http://{addr}")
}

fn config(target: String) -> RunConfig {
    RunConfig {
        target,
        api_key: None,
        model: None,
        repeats: 2,
        max_tokens: 64,
    }
}

#[tokio::test]
async fn every_builtin_attack_succeeds_against_an_obedient_target() {
    let report = run(&config(start(None).await), &builtin()).await.unwrap();
    print!("{}", report.table());
    assert_eq!(report.errors, 0);
    assert_eq!(report.blocked, 0);
    for p in &report.probes {
        assert_eq!(
            p.successes, p.attempts,
            "{} did not succeed: {:?}",
            p.id, p.fired
        );
    }
    assert!(report.asr > 0.99);
}

#[tokio::test]
async fn guardrails_in_front_of_the_obedient_target_stop_the_attacks() {
    let guard = Arc::new(Guard::new(
        Policies::from_toml("[default]\non_canary_leak = \"end\"").unwrap(),
    ));
    let report = run(&config(start(Some(guard)).await), &builtin())
        .await
        .unwrap();
    print!("{}", report.table());
    assert_eq!(report.errors, 0);
    assert!(
        report.blocked * 2 > report.attempts,
        "most attacks are blocked at the door"
    );
    assert!(report.asr <= 0.05, "ASR {:.2} with guardrails", report.asr);
}

/// With the default policy a leaked guard canary is only redacted, so whatever else the
/// system prompt holds (the probe's own canary) still leaks when the input screen misses the
/// attack: the rate is higher than with `on_canary_leak = "end"`, and far below no guard.
#[tokio::test]
async fn redacting_canaries_alone_stops_less_than_ending_the_response() {
    let guard = Arc::new(Guard::new(Policies::from_toml("").unwrap()));
    let report = run(&config(start(Some(guard)).await), &builtin())
        .await
        .unwrap();
    print!("{}", report.table());
    assert!(report.blocked > 0);
    assert!(report.asr < 0.5, "ASR {:.2}", report.asr);
}
