//! SLO classes over HTTP: a request's class (asked, the tenant's, or the default) is counted
//! on /metrics with whether it met its targets; unknown classes are a 400; under a latency
//! target the fitted step-cost model is published.

mod common;

use std::time::Duration;

use common::gateway::GatewayServer;
use common::{engine_config, metric_value, TestServer, MODEL};
use pagoda_server::{load_chat_template, AppState, HttpLimits, SloClass, SloClasses};
use serde_json::json;

/// Loose enough that any request on any machine meets them, and a best-effort class.
fn classes(default: Option<&str>) -> SloClasses {
    SloClasses::new(
        vec![
            SloClass::parse("interactive:ttft=600000,itl=600000").unwrap(),
            SloClass::parse("standard:ttft=900000,itl=900000").unwrap(),
            SloClass::parse("batch").unwrap(),
        ],
        default.map(str::to_owned),
    )
    .unwrap()
}

async fn server(default: Option<&str>, target_itl_ms: Option<u32>) -> TestServer {
    let mut config = engine_config(MODEL);
    config.target_itl_ms = target_itl_ms;
    let template = load_chat_template(&config.model_dir, None).unwrap();
    let engine = pagoda_runtime::start(config).unwrap();
    let state = AppState::with_engine(vec![MODEL.to_string()], engine.clone(), template);
    state.set_slo_classes(classes(default));
    TestServer::start_state(state, engine, Duration::from_secs(10)).await
}

fn completion(slo_class: Option<&str>, n: usize) -> serde_json::Value {
    let mut body = json!({
        "model": MODEL, "prompt": "The old pagoda", "max_tokens": 6, "n": n,
        "ignore_eos": true, "temperature": 0,
    });
    if let Some(class) = slo_class {
        body["slo_class"] = json!(class);
    }
    body
}

fn requests(text: &str, class: &str) -> f64 {
    metric_value(
        text,
        &format!("pagoda:slo_requests_total{{model_name=\"{MODEL}\",slo_class=\"{class}\"}}"),
    )
}

fn attained(text: &str, class: &str, target: &str) -> f64 {
    metric_value(
        text,
        &format!(
            "pagoda:slo_attained_total{{model_name=\"{MODEL}\",slo_class=\"{class}\",target=\"{target}\"}}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sequence_counts_under_its_class_with_its_attainment() {
    let s = server(Some("standard"), None).await;
    let (_, text) = s.get_text("/metrics").await;
    for class in ["interactive", "standard", "batch"] {
        assert_eq!(requests(&text, class), 0.0, "listed from the start");
    }
    assert!(text.contains(&format!(
        "pagoda:slo_target_seconds{{model_name=\"{MODEL}\",slo_class=\"interactive\",target=\"itl\"}} 600.0"
    )));
    for (class, n) in [(Some("batch"), 2), (None, 1), (Some("interactive"), 3)] {
        let (status, body) = s.post("/v1/completions", completion(class, n)).await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, text) = s.get_text("/metrics").await;
    assert_eq!(requests(&text, "batch"), 2.0);
    // Nothing asked: the default. Asking for tighter targets than the default keeps the
    // default's (a client can relax its class, not tighten it).
    assert_eq!(requests(&text, "standard"), 4.0);
    assert_eq!(requests(&text, "interactive"), 0.0);
    for target in ["ttft", "itl", "both"] {
        assert_eq!(attained(&text, "standard", target), 4.0, "{target}");
        assert_eq!(attained(&text, "batch", target), 2.0, "{target}");
    }

    let (status, body) = s.post("/v1/completions", completion(Some("gold"), 1)).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "slo_class");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("batch, interactive, standard"));
    let long = "x".repeat(10_000);
    let (status, body) = s.post("/v1/completions", completion(Some(&long), 1)).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]["message"].as_str().unwrap().len() < 400,
        "the name is not echoed whole"
    );
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_default_a_request_may_pick_any_class() {
    let s = server(None, Some(500)).await;
    let (status, _) = s
        .post("/v1/completions", completion(Some("interactive"), 1))
        .await;
    assert_eq!(status, 200);
    let (status, _) = s.post("/v1/completions", completion(None, 1)).await;
    assert_eq!(status, 200);
    let (_, text) = s.get_text("/metrics").await;
    assert_eq!(requests(&text, "interactive"), 1.0);
    assert_eq!(
        requests(&text, "standard") + requests(&text, "batch"),
        0.0,
        "no class, not counted"
    );
    // The step-cost model is fitted from the steps run (prefills and decodes differ in size)
    // and published.
    let per_token = metric_value(
        &text,
        &format!("pagoda:step_cost_seconds{{model_name=\"{MODEL}\",term=\"per_token\"}}"),
    );
    assert!(per_token >= 0.0);
    s.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_runs_in_the_class_its_policy_names() {
    let policy = r#"
[tenants.nightly]
priority = "batch"
[tenants.app]
slo_class = "interactive"
"#;
    let g = GatewayServer::start_tuned(policy, engine_config(MODEL), HttpLimits::default()).await;
    g.server.state.set_slo_classes(classes(Some("standard")));
    let nightly = g.key("nightly");
    let app = g.key("app");
    for (key, class) in [
        (&nightly, None),
        (&nightly, Some("interactive")),
        (&app, None),
        (&app, Some("batch")),
    ] {
        let reply = g
            .post(Some(key), "/v1/completions", completion(class, 1))
            .await;
        assert_eq!(reply.status, 200, "{}", reply.json);
    }
    let (_, text) = g.server.get_text("/metrics").await;
    // nightly: its priority class names the SLO class, and asking for interactive does not
    // lift it; app: interactive by policy, batch when it asks.
    assert_eq!(requests(&text, "batch"), 3.0);
    assert_eq!(requests(&text, "interactive"), 1.0);
    assert_eq!(requests(&text, "standard"), 0.0);
}
