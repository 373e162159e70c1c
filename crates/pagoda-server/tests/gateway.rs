//! The server behind the gateway: keys, policy, limits, budgets and metering, end to end
//! over HTTP with a real engine and a real SQLite database.

mod common;

use std::time::Duration;

use common::gateway::{cost_of, dec, GatewayServer, PRICES};
use common::{chat_body, MODEL};
use futures_util::StreamExt;
use pagoda_gateway::sink::sqlite::read_events;
use pagoda_gateway::{KeyId, MeteringFailure, Status, UsageQuery};
use rust_decimal::Decimal;
use serde_json::json;

fn completion(prompt: &str, max_tokens: usize) -> serde_json::Value {
    json!({"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_guard_inference_and_errors_follow_openai() {
    let s = GatewayServer::start(&format!(
        "{PRICES}\n[tenants.acme]\n[tenants.other]\nmodels = [\"some-other-model\"]\n"
    ))
    .await;
    let key = s.key("acme");
    let r = s.post(None, "/v1/completions", completion("Hi", 2)).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json["error"]["code"], "invalid_api_key");
    for bad in [
        "pgd_nonsense",
        "sk-0123",
        &key[..key.len() - 1],
        &format!("{key}0"),
    ] {
        let r = s
            .post(Some(bad), "/v1/chat/completions", chat_body("Hi", 2))
            .await;
        assert_eq!(r.status, 401, "{bad}");
        assert_eq!(r.json["error"]["type"], "invalid_request_error");
    }
    // Health, metrics and version stay open for probes.
    assert_eq!(s.get(None, "/health").await.status, 200);
    assert_eq!(s.server.get_text("/metrics").await.0, 200);
    // A valid key works on both endpoints.
    let r = s
        .post(Some(&key), "/v1/completions", completion("Hi", 2))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    let r = s
        .post(Some(&key), "/v1/chat/completions", chat_body("Hi", 2))
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    // A tenant may be denied the model: 403.
    let other = s.key("other");
    let r = s
        .post(Some(&other), "/v1/completions", completion("Hi", 2))
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.json["error"]["code"], "model_not_allowed");
    // Revoked keys stop working at once.
    let id = key.split('_').nth(1).unwrap();
    assert!(s.gateway.keys().revoke(&KeyId::new(id)).unwrap());
    let r = s
        .post(Some(&key), "/v1/completions", completion("Hi", 2))
        .await;
    assert_eq!(r.status, 401);
    // Usage is for admin tenants.
    let r = s.get(Some(&other), "/v1/usage").await;
    assert_eq!(r.status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_answer_429_with_retry_after_and_policy_reloads_live() {
    let s = GatewayServer::start(&format!(
        "{PRICES}\n[tenants.acme]\nrequests_per_minute = 2\nmax_tokens = 3\nmax_prompt_tokens = 50\n"
    ))
    .await;
    let key = s.key("acme");
    // max_tokens is capped at the tenant's 3 (with ignore_eos the engine would give 20).
    let mut body = completion("Hi", 20);
    body["ignore_eos"] = json!(true);
    let r = s.post(Some(&key), "/v1/completions", body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["usage"]["completion_tokens"], 3);
    let long = "pagoda ".repeat(80);
    let r = s
        .post(Some(&key), "/v1/completions", completion(&long, 1))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["error"]["code"], "prompt_too_long");
    assert_eq!(
        s.post(Some(&key), "/v1/completions", completion("Hi", 1))
            .await
            .status,
        200
    );
    let r = s
        .post(Some(&key), "/v1/completions", completion("Hi", 1))
        .await;
    assert_eq!(r.status, 429);
    assert_eq!(r.json["error"]["code"], "rate_limit_exceeded");
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "{retry}");
    // Raise the limit in the file: the running server picks it up.
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(
        &s.policy,
        format!("{PRICES}\n[tenants.acme]\nrequests_per_minute = 100\n"),
    )
    .unwrap();
    let mut status = 0;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        status = s
            .post(Some(&key), "/v1/completions", completion("Hi", 1))
            .await
            .status;
        if status == 200 {
            break;
        }
    }
    assert_eq!(status, 200, "the new limit did not take effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_holds_under_200_concurrent_requests_and_events_match_responses() {
    let budget = dec("0.0005");
    let s = GatewayServer::start(&format!(
        "{PRICES}\n[tenants.acme]\nbudget = {{ daily = \"{budget}\", alerts = [0.5, 0.9] }}\n[tenants.root]\nadmin = true\n"
    ))
    .await;
    let key = s.key("acme");
    let mut tasks = Vec::new();
    for i in 0..200 {
        let client = s.server.client.clone();
        let url = s.server.url(if i % 2 == 0 {
            "/v1/completions"
        } else {
            "/v1/chat/completions"
        });
        let key = key.clone();
        let max_tokens = 1 + (i * 7) % 12;
        let mut body = if i % 2 == 0 {
            completion(&format!("request {i} says"), max_tokens)
        } else {
            chat_body(&format!("request {i} asks"), max_tokens)
        };
        // Half run to max_tokens, half may stop early: reservations are settled down.
        body["ignore_eos"] = json!(i % 4 < 2);
        tasks.push(tokio::spawn(async move {
            common::gateway::post(&client, &url, Some(&key), body).await
        }));
    }
    let mut spent_by_responses = Decimal::ZERO;
    let mut cost_by_response_id = std::collections::HashMap::new();
    let (mut ok, mut refused) = (0, 0);
    for task in tasks {
        let r = task.await.unwrap();
        match r.status {
            200 => {
                ok += 1;
                spent_by_responses += cost_of(&r.json["usage"]);
                let id = r.json["id"].as_str().unwrap().to_string();
                cost_by_response_id.insert(id, cost_of(&r.json["usage"]));
            }
            429 => {
                refused += 1;
                assert_eq!(r.json["error"]["code"], "insufficient_quota");
                assert_eq!(r.json["error"]["type"], "insufficient_quota");
                assert!(r.headers.contains_key("retry-after"));
            }
            other => panic!("unexpected {other}: {}", r.json),
        }
    }
    assert!(ok > 0 && refused > 0, "ok {ok}, refused {refused}");
    s.gateway.flush().await;
    let events: Vec<_> = read_events(&s.db)
        .unwrap()
        .into_iter()
        .filter(|e| e.tenant.as_str() == "acme")
        .collect();
    assert_eq!(events.len(), ok);
    assert!(events.iter().all(|e| e.status == Status::Completed));
    // Each event carries its response's id and that response's cost.
    for e in &events {
        assert_eq!(
            cost_by_response_id.get(e.request_id.as_str()),
            Some(&e.cost),
            "{}",
            e.request_id
        );
    }
    let spent_by_events: Decimal = events.iter().map(|e| e.cost).sum();
    assert_eq!(spent_by_events, spent_by_responses);
    assert!(spent_by_events <= budget, "{spent_by_events} > {budget}");
    // The usage API reports the same, for an admin.
    let admin = s.key("root");
    let r = s
        .get(Some(&admin), "/v1/usage?tenant=acme&group_by=model,hour")
        .await;
    assert_eq!(r.status, 200, "{}", r.json);
    let rows = r.json["data"].as_array().unwrap();
    let total: Decimal = rows
        .iter()
        .map(|row| dec(row["cost"].as_str().unwrap()))
        .sum();
    assert_eq!(total, spent_by_responses);
    assert_eq!(
        rows.iter()
            .map(|r| r["requests"].as_u64().unwrap())
            .sum::<u64>(),
        ok as u64
    );
    assert_eq!(rows[0]["model"], MODEL);
    // Time filters: nothing from tomorrow on, everything since yesterday; bad input is a 400.
    let r = s
        .get(Some(&admin), "/v1/usage?tenant=acme&from=2999-01-01")
        .await;
    assert_eq!(r.json["data"].as_array().unwrap().len(), 0);
    let r = s
        .get(Some(&admin), "/v1/usage?from=2000-01-01&to=2999-01-01")
        .await;
    let acme = r.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["tenant"] == "acme")
        .unwrap()
        .clone();
    assert_eq!(dec(acme["cost"].as_str().unwrap()), spent_by_responses);
    assert!(acme.get("model").is_none() && acme.get("hour").is_none());
    let r = s.get(Some(&admin), "/v1/usage?from=yesterday").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["error"]["param"], "from");
    let r = s.get(Some(&admin), "/v1/usage?group_by=colour").await;
    assert_eq!(r.status, 400);
    let r = s.get(Some(&admin), "/v1/usage?from=9223372036854775").await;
    assert_eq!(r.status, 400, "{}", r.json);
    // And the Prometheus counters: per tenant only for an admin's scrape.
    let (_, open) = s.server.get_text("/metrics").await;
    assert!(
        open.contains("pagoda:") && !open.contains("tenant=\""),
        "{open}"
    );
    let scrape = |key: String| {
        let request = s
            .server
            .client
            .get(s.server.url("/metrics"))
            .bearer_auth(key);
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    assert!(!scrape(key.clone()).await.contains("tenant=\""));
    let metrics = scrape(admin.clone()).await;
    let line = metrics
        .lines()
        .find(|l| l.starts_with("pagoda:gateway_cost_total{tenant=\"acme\""))
        .unwrap();
    assert_eq!(dec(line.rsplit(' ').next().unwrap()), spent_by_responses);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_stream_is_billed_for_what_it_produced_and_frees_its_slot() {
    let s = GatewayServer::start(&format!("{PRICES}\n[tenants.acme]\nmax_concurrent = 1\n")).await;
    let key = s.key("acme");
    // A prompt of several KV blocks, served twice first: the second time from the cache.
    let prompt = "Once upon a time a keeper climbed the stairs of the old pagoda. ".repeat(6);
    let mut cached = 0;
    for _ in 0..2 {
        let r = s
            .post(Some(&key), "/v1/completions", completion(&prompt, 1))
            .await;
        assert_eq!(r.status, 200, "{}", r.json);
        cached = r.json["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
    }
    assert!(
        cached > 0,
        "the repeated prompt was not served from the cache"
    );
    let mut body = completion(&prompt, 300);
    body["stream"] = json!(true);
    body["ignore_eos"] = json!(true);
    let response = s
        .server
        .client
        .post(s.server.url("/v1/completions"))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    for _ in 0..3 {
        stream.next().await.unwrap().unwrap();
    }
    drop(stream);
    s.server.wait_idle().await;
    // The slot comes back once the abort is noticed.
    let mut status = 0;
    for _ in 0..200 {
        status = s
            .post(Some(&key), "/v1/completions", completion("Hi", 1))
            .await
            .status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, 200);
    s.gateway.flush().await;
    let events = read_events(&s.db).unwrap();
    let aborted: Vec<_> = events
        .iter()
        .filter(|e| e.status == Status::Aborted)
        .collect();
    assert_eq!(aborted.len(), 1, "{events:?}");
    let e = aborted[0];
    assert!(
        e.completion_tokens >= 1 && e.completion_tokens < 300,
        "{e:?}"
    );
    assert!(e.prompt_tokens > cached);
    // Its prompt came from the cache as well, and is billed as such although it never ended.
    assert_eq!(e.cached_tokens, cached);
    assert_eq!(e.finish_reason.as_deref(), Some("abort"));
    let expected = (Decimal::from(e.prompt_tokens - cached) * dec("0.50")
        + Decimal::from(cached) * dec("0.05")
        + Decimal::from(e.completion_tokens) * dec("1.50"))
        / Decimal::from(1_000_000u64);
    assert_eq!(e.cost, expected);
}

/// A client that reads a little and then stops reading: the engine stops queueing for it
/// (`max_unread_outputs`), the connection is closed at the write deadline, and the event
/// bills every token the engine generated, not only what the server managed to send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_billed_for_everything_generated() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut engine = common::engine_config(MODEL);
    engine.max_unread_outputs = 4;
    let http = pagoda_server::HttpLimits {
        write_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let s = GatewayServer::start_tuned(PRICES, engine, http).await;
    let key = s.key("acme");
    // 48,000 tokens of events, several MB: more than the socket buffers and hyper hold.
    let body = json!({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 500,
        "ignore_eos": true, "n": 96, "stream": true, "temperature": 1.0, "seed": 3});
    let body = body.to_string();
    let addr = s.server.base.trim_start_matches("http://").to_string();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(2048).unwrap();
    let mut conn = socket.connect(addr.parse().unwrap()).await.unwrap();
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut first = [0u8; 1024];
    conn.read_exact(&mut first).await.unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200"));
    // Not another byte is read; the event appears once the server gives up on the client.
    let mut events = Vec::new();
    for _ in 0..600 {
        s.gateway.flush().await;
        events = read_events(&s.db).unwrap();
        if !events.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let e = events.first().expect("no cost event");
    assert_eq!(e.status, Status::Aborted, "{e:?}");
    let generated = s.server.engine.stats().generation_tokens_total;
    assert!(
        generated < 96 * 500,
        "the stalled request ran to the end: {generated}"
    );
    assert_eq!(e.completion_tokens, generated, "{e:?}");
    drop(conn);
}

/// Sets or clears the immutable flag: the SQLite files then refuse writes, even through the
/// gateway's open descriptors, as a failed or read-only disk would.
fn immutable(db: &std::path::Path, on: bool) {
    for path in [db.to_path_buf(), db.with_extension("db-wal")] {
        let flag = if on { "+i" } else { "-i" };
        let status = std::process::Command::new("chattr")
            .arg(flag)
            .arg(&path)
            .status()
            .expect("chattr (e2fsprogs) is needed for this test");
        assert!(status.success(), "chattr {flag} {}", path.display());
    }
}

/// A metering store that refuses writes: by default new requests get 503 once it counts as
/// failing, with `serve` they are served on; either way every admitted request's event
/// reaches the store once it takes writes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_metering_store_refuses_admissions_unless_told_to_serve() {
    for (mode, expected) in [
        (MeteringFailure::Refuse, 503),
        (MeteringFailure::Serve, 200),
    ] {
        let s = GatewayServer::start_configured(
            PRICES,
            common::engine_config(MODEL),
            pagoda_server::HttpLimits::default(),
            |c| c.metering_on_failure = mode,
        )
        .await;
        let key = s.key("acme");
        let r = s
            .post(Some(&key), "/v1/completions", completion("Hi", 2))
            .await;
        assert_eq!(r.status, 200, "{}", r.json);
        s.gateway.flush().await;
        immutable(&s.db, true);
        let mut served = 1;
        let mut last = 0;
        for _ in 0..40 {
            let r = s
                .post(Some(&key), "/v1/completions", completion("Hi", 2))
                .await;
            last = r.status;
            if last == 503 {
                assert_eq!(r.json["error"]["type"], "service_unavailable");
                assert!(r.headers.get("retry-after").is_some());
                break;
            }
            assert_eq!(last, 200, "{}", r.json);
            served += 1;
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        immutable(&s.db, false);
        assert_eq!(last, expected, "{mode:?}");
        s.gateway.flush().await;
        let events = read_events(&s.db).unwrap();
        assert_eq!(events.len(), served, "{mode:?}: an event was lost");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_do_not_share_the_prefix_cache_unless_grouped_and_cached_tokens_bill_cheaper() {
    let s = GatewayServer::start(&format!(
        "{PRICES}\n[tenants.c]\ncache_group = \"docs\"\n[tenants.d]\ncache_group = \"docs\"\n"
    ))
    .await;
    let (a, b, c, d) = (s.key("a"), s.key("b"), s.key("c"), s.key("d"));
    // Long enough for several full KV blocks.
    let prompt = "The old pagoda stood on the hill above the river for many centuries ".repeat(4);
    let cached = |r: &common::gateway::Reply| {
        r.json["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap()
    };
    let first = s
        .post(Some(&a), "/v1/completions", completion(&prompt, 1))
        .await;
    assert_eq!(cached(&first), 0);
    let again = s
        .post(Some(&a), "/v1/completions", completion(&prompt, 1))
        .await;
    assert!(cached(&again) > 0, "the same tenant reuses its cache");
    let other = s
        .post(Some(&b), "/v1/completions", completion(&prompt, 1))
        .await;
    assert_eq!(cached(&other), 0, "another tenant must not hit a's cache");
    // A client salt narrows sharing within the tenant.
    let mut salted = completion(&prompt, 1);
    salted["cache_salt"] = json!("private");
    assert_eq!(
        cached(&s.post(Some(&a), "/v1/completions", salted).await),
        0
    );
    // A sharing group shares.
    s.post(Some(&c), "/v1/completions", completion(&prompt, 1))
        .await;
    let shared = s
        .post(Some(&d), "/v1/completions", completion(&prompt, 1))
        .await;
    assert!(cached(&shared) > 0, "tenants of one group share");
    // The second request of `a` was billed with its cached tokens at the cached rate.
    s.gateway.flush().await;
    let rows = s
        .gateway
        .usage(&UsageQuery {
            tenant: Some("a".into()),
            ..UsageQuery::default()
        })
        .await
        .unwrap();
    let expected = cost_of(&first.json["usage"]) + cost_of(&again.json["usage"]) + {
        let mut u = first.json["usage"].clone();
        u["completion_tokens"] = json!(1);
        cost_of(&u)
    };
    assert_eq!(rows[0].cached_tokens, cached(&again));
    assert_eq!(rows[0].cost, expected);
    assert!(cost_of(&again.json["usage"]) < cost_of(&first.json["usage"]));
}
