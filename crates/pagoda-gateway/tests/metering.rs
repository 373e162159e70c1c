//! The gateway library on its own: admission shapes requests, and a committed ticket's event
//! is on disk when `commit` returns.

use std::time::Duration;

use pagoda_gateway::sink::sqlite::read_events;
use pagoda_gateway::{
    ChoiceEnd, Gateway, GatewayConfig, GatewayError, PlannedPrompt, Status, TenantId,
};

async fn gateway(dir: &std::path::Path, policy: &str) -> std::sync::Arc<Gateway> {
    let path = dir.join("gw.toml");
    std::fs::write(&path, policy).unwrap();
    let mut config = GatewayConfig::new(dir.join("gw.db"));
    config.policy = Some(path);
    Gateway::open(config).await.unwrap()
}

fn end(prompt: usize, completion: usize) -> ChoiceEnd<'static> {
    ChoiceEnd {
        prompt_tokens: prompt,
        cached_tokens: 0,
        completion_tokens: completion,
        queued: Duration::from_millis(1),
        first_token: Some(Duration::from_millis(2)),
        compute: Duration::from_millis(3),
        finish_reason: "length",
        failed: false,
    }
}

#[tokio::test]
async fn a_committed_event_is_on_disk_when_commit_returns() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(dir.path(), "[pricing.m]\ninput = \"1\"\noutput = \"2\"\n").await;
    let (record, key) = gw.keys().create(&TenantId::new("t"), None, None).unwrap();
    let caller = gw
        .authenticate(Some(&format!("Bearer {}", key.reveal())))
        .unwrap();
    assert_eq!(caller.key_id, record.key_id);
    for i in 0..50 {
        let mut plan = [PlannedPrompt {
            prompt_tokens: 10,
            max_tokens: 5,
            n: 1,
        }];
        let admitted = gw.admit(&caller, "m", &mut plan).await.unwrap();
        let ticket = admitted.ticket;
        ticket.submitted();
        ticket.on_tokens(0, 0, 5, None);
        assert!(ticket.on_finished(0, 0, end(10, 5)));
        ticket.commit().await;
        // Read through a connection of our own, right away.
        let events = read_events(&dir.path().join("gw.db")).unwrap();
        assert_eq!(
            events.len(),
            i + 1,
            "the event must be durable when commit returns"
        );
        let e = events
            .iter()
            .find(|e| &e.request_id == ticket.request_id())
            .unwrap();
        assert_eq!((e.prompt_tokens, e.completion_tokens), (10, 5));
        assert_eq!(e.cost.to_string(), "0.00002");
        assert_eq!(e.status, Status::Completed);
        assert_eq!((e.queue_ms, e.ttft_ms, e.compute_ms), (1.0, Some(2.0), 3.0));
    }
}

#[tokio::test]
async fn admission_caps_tokens_sets_priority_and_salts_per_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(
        dir.path(),
        "[tenants.a]\npriority = \"batch\"\nmax_tokens = 8\n[tenants.b]\ncache_group = \"shared\"\n[tenants.c]\ncache_group = \"shared\"\nmodels = [\"m\"]\n",
    )
    .await;
    let key = |t: &str| {
        let (_, k) = gw.keys().create(&TenantId::new(t), None, None).unwrap();
        gw.authenticate(Some(&format!("Bearer {}", k.reveal())))
            .unwrap()
    };
    let (a, b, c, d) = (key("a"), key("b"), key("c"), key("d"));
    let mut plan = [PlannedPrompt {
        prompt_tokens: 3,
        max_tokens: 100,
        n: 2,
    }];
    let admitted = gw.admit(&a, "m", &mut plan).await.unwrap();
    assert_eq!(plan[0].max_tokens, 8);
    assert_eq!(admitted.priority, 10);
    // A client may lower its priority (a larger number), never raise it.
    assert_eq!(admitted.priority(Some(0)), 10);
    assert_eq!(admitted.priority(Some(50)), 50);
    let salt_a = admitted.cache_salt(None);
    assert_ne!(admitted.cache_salt(Some("x")), salt_a);
    let mut plan = [PlannedPrompt {
        prompt_tokens: 3,
        max_tokens: 4,
        n: 1,
    }];
    let sb = gw.admit(&b, "m", &mut plan).await.unwrap().cache_salt(None);
    let sc = gw.admit(&c, "m", &mut plan).await.unwrap().cache_salt(None);
    let sd = gw.admit(&d, "m", &mut plan).await.unwrap();
    assert_eq!(sb, sc, "a sharing group shares one salt");
    assert_ne!(sd.cache_salt(None), salt_a);
    assert_ne!(sd.cache_salt(None), sb);
    assert_eq!(sd.priority, 0, "interactive by default");
    assert!(matches!(
        gw.admit(&c, "other", &mut plan).await,
        Err(GatewayError::ModelForbidden { .. })
    ));
    // Nothing ran: dropping the tickets records refusals at no cost, and frees the slots.
    drop(sd);
    drop(admitted);
    gw.flush().await;
    let events = read_events(&dir.path().join("gw.db")).unwrap();
    assert!(events
        .iter()
        .all(|e| e.status == Status::Rejected && e.cost.is_zero()));
    assert_eq!(events.len(), 4);
}

#[tokio::test]
async fn the_jsonl_sink_writes_one_line_per_event_and_answers_usage() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    let policy = dir.path().join("gw.toml");
    std::fs::write(&policy, "[pricing.m]\ninput = \"1\"\noutput = \"3\"\n").unwrap();
    let mut config = GatewayConfig::new(dir.path().join("gw.db"));
    config.policy = Some(policy);
    config.sink = pagoda_gateway::SinkSpec::parse(&format!("jsonl={}", path.display())).unwrap();
    let gw = Gateway::open(config).await.unwrap();
    let (_, key) = gw.keys().create(&TenantId::new("t"), None, None).unwrap();
    let caller = gw
        .authenticate(Some(&format!("Bearer {}", key.reveal())))
        .unwrap();
    for completion in 1..=3 {
        let mut plan = [PlannedPrompt {
            prompt_tokens: 4,
            max_tokens: 8,
            n: 1,
        }];
        let ticket = gw.admit(&caller, "m", &mut plan).await.unwrap().ticket;
        ticket.submitted();
        assert!(ticket.on_finished(0, 0, end(4, completion)));
        ticket.commit().await;
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["cost"], "0.000007");
    assert_eq!(first["status"], "completed");
    let rows = gw
        .usage(&pagoda_gateway::UsageQuery::default())
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].requests, rows[0].completion_tokens), (3, 6));
    assert_eq!(rows[0].cost, "0.00003".parse().unwrap());
    assert!(pagoda_gateway::SinkSpec::parse("kafka=x").is_err());
}

/// Reads one HTTP request's body from a connection and answers 200.
async fn one_post_body(listener: &tokio::net::TcpListener) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut conn, _) = listener.accept().await.unwrap();
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await.unwrap();
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= len {
                conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                    .await
                    .unwrap();
                return serde_json::from_str(&body[..len]).unwrap();
            }
        }
        assert!(n > 0, "connection closed early");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_alerts_reach_the_webhook_once_per_threshold_and_soft_budgets_do_not_refuse() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alerts", listener.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    // Each request costs exactly 0.10; the soft daily budget is 0.25.
    let gw = gateway(
        dir.path(),
        &format!(
            "[pricing.m]\ninput = \"0\"\noutput = \"100000\"\n\
             [tenants.t]\nbudget = {{ daily = \"0.25\", hard = false, alerts = [0.5, 1.0], webhook = \"{url}\" }}\n"
        ),
    )
    .await;
    let (_, key) = gw.keys().create(&TenantId::new("t"), None, None).unwrap();
    let caller = gw
        .authenticate(Some(&format!("Bearer {}", key.reveal())))
        .unwrap();
    let mut alerts = Vec::new();
    for i in 0..4 {
        let mut plan = [PlannedPrompt {
            prompt_tokens: 1,
            max_tokens: 1,
            n: 1,
        }];
        // Soft: the fourth request (0.40 > 0.25) is admitted all the same.
        let ticket = gw.admit(&caller, "m", &mut plan).await.unwrap().ticket;
        ticket.submitted();
        assert!(ticket.on_finished(0, 0, end(1, 1)));
        ticket.commit().await;
        // 0.10 (40%): nothing; 0.20 (80%): the 0.5 alert; 0.30 (120%): the 1.0 alert.
        if i == 1 || i == 2 {
            let alert = tokio::time::timeout(Duration::from_secs(10), one_post_body(&listener))
                .await
                .expect("no alert arrived");
            alerts.push(alert);
        }
    }
    let threshold = |a: &serde_json::Value| -> rust_decimal::Decimal {
        a["threshold"].as_str().unwrap().parse().unwrap()
    };
    assert_eq!(threshold(&alerts[0]), rust_decimal::Decimal::new(5, 1));
    assert_eq!(threshold(&alerts[1]), rust_decimal::Decimal::ONE);
    assert_eq!(alerts[1]["tenant"], "t");
    assert_eq!(alerts[1]["period"], "daily");
    assert_eq!(alerts[1]["hard"], false);
    // No third alert for the fourth request: thresholds fire once per period.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), listener.accept())
            .await
            .is_err()
    );
}

/// A large reservation is not spend: the alert waits for the settled crossing, and says what
/// is still reserved beside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_alerts_follow_settled_spend_not_reservations() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alerts", listener.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    // 0.10 per output token; a soft daily budget of 1.00 alerting at 80%.
    let gw = gateway(
        dir.path(),
        &format!(
            "[pricing.m]\ninput = \"0\"\noutput = \"100000\"\n\
             [tenants.t]\nbudget = {{ daily = \"1.00\", hard = false, alerts = [0.8], webhook = \"{url}\" }}\n"
        ),
    )
    .await;
    let (_, key) = gw.keys().create(&TenantId::new("t"), None, None).unwrap();
    let caller = gw
        .authenticate(Some(&format!("Bearer {}", key.reveal())))
        .unwrap();
    let run = |max_tokens: usize| {
        let gw = gw.clone();
        let caller = caller.clone();
        async move {
            let mut plan = [PlannedPrompt {
                prompt_tokens: 1,
                max_tokens,
                n: 1,
            }];
            let ticket = gw.admit(&caller, "m", &mut plan).await.unwrap().ticket;
            ticket.submitted();
            assert!(ticket.on_finished(0, 0, end(1, 1)));
            ticket.commit().await;
        }
    };
    // Reserves 0.90 (90% of the budget), spends 0.10.
    run(9).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), listener.accept())
            .await
            .is_err(),
        "an alert fired on a reservation"
    );
    for _ in 0..6 {
        run(1).await;
    }
    // 0.70 settled: still below 80%; the eighth request crosses it.
    let alert = tokio::spawn(async move { one_post_body(&listener).await });
    run(1).await;
    let alert = tokio::time::timeout(Duration::from_secs(10), alert)
        .await
        .expect("no alert arrived")
        .unwrap();
    let dec =
        |a: &serde_json::Value| -> rust_decimal::Decimal { a.as_str().unwrap().parse().unwrap() };
    assert_eq!(dec(&alert["spent"]), rust_decimal::Decimal::new(8, 1));
    assert_eq!(dec(&alert["reserved"]), rust_decimal::Decimal::ZERO);
}
