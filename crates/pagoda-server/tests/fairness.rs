//! One tenant flooding the server with wide requests cannot make another tenant's request
//! fail or wait: pending work is bounded per tenant in sequences, and the scheduler gives a
//! tenant with nothing running a slot within one step.

mod common;

use std::time::Duration;

use common::gateway::{post, GatewayServer};
use common::MODEL;
use futures_util::future::join_all;
use pagoda_engine::TenantKey;
use pagoda_runtime::{GenerateRequest, SamplingParams};
use serde_json::json;

const POLICY: &str = r#"
[tenants.flood]
[tenants.victim]
"#;

fn wide(n: usize) -> serde_json::Value {
    json!({
        "model": MODEL, "prompt": "flood the queue", "n": n, "max_tokens": 48,
        "ignore_eos": true, "temperature": 1.0, "seed": 7,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_tenant_cannot_starve_another() {
    let g = GatewayServer::start(POLICY).await;
    let flood = g.key("flood");
    let victim = g.key("victim");
    let per_tenant = common::engine_config(MODEL).max_pending_per_tenant;

    // Eight requests of 128 sequences each: more than the flooder's share of the queue.
    let floods: Vec<_> = (0..8)
        .map(|_| {
            let client = g.server.client.clone();
            let url = g.server.url("/v1/completions");
            let key = flood.clone();
            tokio::spawn(async move {
                let r = post(&client, &url, Some(&key), wide(128)).await;
                (r.status, r.json)
            })
        })
        .collect();
    let flooding = tokio::spawn(async move {
        join_all(floods)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect::<Vec<_>>()
    });
    // Let the flood reach the engine.
    for _ in 0..2000 {
        if g.server.engine.num_in_flight() >= 128 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        g.server.engine.num_in_flight() >= 128,
        "the flood never arrived"
    );

    // The victim is served, not refused, while the flood runs.
    let reply = g
        .post(
            Some(&victim),
            "/v1/chat/completions",
            json!({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.json);
    assert_eq!(reply.json["choices"][0]["finish_reason"], "length");

    // And it waits at most one engine step for its first schedule, however deep the flood.
    let mut sampling = SamplingParams::greedy(4);
    sampling.ignore_eos = true;
    let mut request = GenerateRequest::new(vec![1, 2, 3], sampling);
    request.tenant = Some(TenantKey::new("victim"));
    let mut stream = g.server.engine.submit(request).unwrap();
    let mut steps_waited = None;
    while let Some(out) = stream.next().await {
        if let Some(done) = out.finished {
            assert!(done.error.is_none(), "{:?}", done.error);
            steps_waited = Some(done.timings.steps_waited);
        }
    }
    assert!(
        steps_waited.is_some_and(|s| s <= 1),
        "waited {steps_waited:?} steps"
    );

    let replies = flooding.await.unwrap();
    let refused: Vec<_> = replies.iter().filter(|(s, _)| *s == 429).collect();
    let served = replies.iter().filter(|(s, _)| *s == 200).count();
    assert!(served * 128 <= per_tenant && served >= 1, "{served} served");
    assert_eq!(served + refused.len(), 8, "{replies:?}");
    for (_, body) in &refused {
        assert_eq!(body["error"]["code"], "rate_limit_exceeded", "{body}");
    }
    g.server.wait_idle().await;
    assert_eq!(g.server.engine.stats().num_used_blocks(), 0);
}

#[tokio::test]
async fn the_gateway_counts_sequences_against_max_concurrent() {
    let g = GatewayServer::start("[tenants.t]\nmax_concurrent = 16\n").await;
    let key = g.key("t");
    // More sequences than the limit in one request can never run: a 400 naming `n`.
    let reply = g.post(Some(&key), "/v1/completions", wide(17)).await;
    assert_eq!(reply.status, 400, "{}", reply.json);
    assert_eq!(reply.json["error"]["param"], "n");
    // While 12 sequences run, 12 more do not fit beside them.
    let long = json!({
        "model": MODEL, "prompt": "hold the slots", "n": 12, "max_tokens": 400,
        "ignore_eos": true, "stream": true,
    });
    let running = {
        let client = g.server.client.clone();
        let url = g.server.url("/v1/completions");
        let key = key.clone();
        tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(key)
                .json(&long)
                .send()
                .await
                .unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        })
    };
    for _ in 0..2000 {
        if g.server.engine.num_in_flight() >= 12 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        g.server.engine.num_in_flight() >= 12,
        "the long request never arrived"
    );
    let reply = g.post(Some(&key), "/v1/completions", wide(12)).await;
    assert_eq!(reply.status, 429, "{}", reply.json);
    assert_eq!(reply.json["error"]["code"], "rate_limit_exceeded");
    // Four more still fit.
    let reply = g.post(Some(&key), "/v1/completions", wide(4)).await;
    assert_eq!(reply.status, 200, "{}", reply.json);
    let (status, text) = running.await.unwrap();
    assert_eq!(status, 200);
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    g.server.wait_idle().await;
    let reply = g.post(Some(&key), "/v1/completions", wide(12)).await;
    assert_eq!(reply.status, 200, "{}", reply.json);
}
