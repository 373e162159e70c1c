//! Two replicas (two servers, each with its own engine and gateway) share one tenant's token
//! rate and budget through a real Redis (Debian's `redis-server`, started here on a free
//! port), and enforce one limit under 200 concurrent requests, not two.

mod common;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::gateway::{cost_of, dec, post, GatewayServer, PRICES};
use common::MODEL;
use pagoda_gateway::sink::sqlite::read_events;
use pagoda_gateway::TenantId;
use rust_decimal::Decimal;
use serde_json::json;

struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start(dir: &std::path::Path) -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Redis::start_on(dir, port)
    }

    /// A fresh, empty Redis (no persistence) on `port`.
    fn start_on(dir: &std::path::Path, port: u16) -> Redis {
        let binary = ["/usr/bin/redis-server", "/usr/sbin/redis-server"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .expect("redis-server is not installed (apt-get install redis-server)");
        let child = Command::new(binary)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting redis-server");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) {
                let mut buf = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
                {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Redis { child, port }
    }
}

impl Redis {
    /// Stops (SIGSTOP) or resumes (SIGCONT) the process: a Redis that accepts connections
    /// and never answers.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const PROMPT: &str = "The old pagoda";

fn body() -> serde_json::Value {
    json!({"model": MODEL, "prompt": PROMPT, "max_tokens": 4, "ignore_eos": true, "temperature": 0})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_token_rate_and_one_budget_through_redis() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path());
    let url = format!("redis://127.0.0.1:{}/", redis.port);
    let policy = format!("{PRICES}\n[tenants.probe]\n");
    let a = GatewayServer::start_in(dir.path().into(), &policy, Some(url.clone())).await;
    let b = GatewayServer::start_in(dir.path().into(), &policy, Some(url)).await;
    let probe = a.key("probe");
    // Every request below is this one: its tokens and cost are fixed (the prompt is shorter
    // than a KV block, so nothing is ever served from the cache).
    let r = a.post(Some(&probe), "/v1/completions", body()).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let usage = r.json["usage"].clone();
    assert_eq!(usage["completion_tokens"], 4);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    let tokens = usage["total_tokens"].as_u64().unwrap();
    let cost = cost_of(&usage);
    // The token rate fits exactly 40 requests a minute, the budget 25.5 requests.
    let budget = cost * dec("25.5");
    std::thread::sleep(Duration::from_millis(20));
    // Written whole and renamed into place, so the policy watchers never read half a file.
    let staged = dir.path().join("gateway.toml.new");
    std::fs::write(
        &staged,
        format!(
            "{PRICES}\n[tenants.probe]\n[tenants.tok]\ntokens_per_minute = {}\n[tenants.bud]\nbudget = {{ daily = \"{budget}\" }}\n",
            40 * tokens
        ),
    )
    .unwrap();
    std::fs::rename(&staged, &a.policy).unwrap();
    for replica in [&a, &b] {
        // Either this call or the replica's own watcher (every 50 ms) loads the new file.
        replica.gateway.reload_policy().unwrap();
        let policy = replica.gateway.policy();
        assert_eq!(
            policy.tenant(&TenantId::new("tok")).tokens_per_minute,
            Some(40 * tokens)
        );
    }
    let (tok, bud) = (a.key("tok"), a.key("bud"));

    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let server = if i % 2 == 0 { &a } else { &b };
        let key = if i % 4 < 2 { tok.clone() } else { bud.clone() };
        let client = server.server.client.clone();
        let url = server.server.url("/v1/completions");
        tasks.push(tokio::spawn(async move {
            (key.clone(), post(&client, &url, Some(&key), body()).await)
        }));
    }
    let (mut tok_ok, mut bud_ok, mut bud_spent) = (0u64, 0u64, Decimal::ZERO);
    for task in tasks {
        let (key, r) = task.await.unwrap();
        match (r.status, key == tok) {
            (200, true) => tok_ok += 1,
            (200, false) => {
                bud_ok += 1;
                bud_spent += cost_of(&r.json["usage"]);
            }
            (429, true) => assert_eq!(r.json["error"]["code"], "rate_limit_exceeded"),
            (429, false) => assert_eq!(r.json["error"]["code"], "insufficient_quota"),
            (status, _) => panic!("unexpected {status}: {}", r.json),
        }
    }
    let elapsed = started.elapsed().as_secs_f64();

    // The budget has no refill: exactly 25 fit, whichever replica admitted them.
    assert_eq!(bud_ok, 25);
    assert!(bud_spent <= budget);
    // The bucket refills at 40 requests a minute while the test runs; allow exactly that.
    let refill = (elapsed * 40.0 / 60.0).floor() as u64;
    assert!(
        (40..=40 + refill + 1).contains(&tok_ok),
        "{tok_ok} requests admitted in {elapsed:.2}s (one shared limit allows 40 + {refill})"
    );
    // Both replicas metered into the one database; the events add up to the responses.
    a.gateway.flush().await;
    b.gateway.flush().await;
    let events = read_events(&a.db).unwrap();
    let bud_events: Vec<_> = events
        .iter()
        .filter(|e| e.tenant.as_str() == "bud")
        .collect();
    assert_eq!(bud_events.len() as u64, bud_ok);
    assert_eq!(
        bud_events.iter().map(|e| e.cost).sum::<Decimal>(),
        bud_spent
    );
    assert_eq!(
        events.iter().filter(|e| e.tenant.as_str() == "tok").count() as u64,
        tok_ok
    );
}

/// A Redis that stops answering fails admission closed, quickly (500, not a hang), and the
/// gateway recovers when it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stops_answering_fails_admission_closed_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path());
    let url = format!("redis://127.0.0.1:{}/", redis.port);
    let s = GatewayServer::start_in(
        dir.path().into(),
        &format!("{PRICES}\n[tenants.t]\n"),
        Some(url),
    )
    .await;
    let key = s.key("t");
    assert_eq!(
        s.post(Some(&key), "/v1/completions", body()).await.status,
        200
    );
    redis.signal("-STOP");
    let started = Instant::now();
    let r = s.post(Some(&key), "/v1/completions", body()).await;
    let waited = started.elapsed();
    redis.signal("-CONT");
    assert_eq!(r.status, 500, "{}", r.json);
    assert_eq!(r.json["error"]["type"], "server_error");
    assert!(
        waited < Duration::from_secs(8),
        "admission hung for {waited:?}"
    );
    let mut status = 0;
    for _ in 0..100 {
        status = s.post(Some(&key), "/v1/completions", body()).await.status;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "no recovery after Redis answered again");
}

/// Redis restarts empty (no persistence): the tenant's spend is seeded again from the
/// metering store, so the budget is not handed out afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_survives_a_redis_restart_without_persistence() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path());
    let port = redis.port;
    let url = format!("redis://127.0.0.1:{port}/");
    let probe_policy = format!("{PRICES}\n[tenants.probe]\n");
    let s = GatewayServer::start_in(dir.path().into(), &probe_policy, Some(url)).await;
    let probe = s.key("probe");
    let r = s.post(Some(&probe), "/v1/completions", body()).await;
    assert_eq!(r.status, 200, "{}", r.json);
    let cost = cost_of(&r.json["usage"]);
    // Room for exactly three requests a day.
    let staged = dir.path().join("gateway.toml.new");
    std::fs::write(
        &staged,
        format!(
            "{PRICES}\n[tenants.bud]\nbudget = {{ daily = \"{}\" }}\n",
            cost * dec("3.5")
        ),
    )
    .unwrap();
    std::fs::rename(&staged, &s.policy).unwrap();
    s.gateway.reload_policy().unwrap();
    let bud = s.key("bud");
    for _ in 0..2 {
        let r = s.post(Some(&bud), "/v1/completions", body()).await;
        assert_eq!(r.status, 200, "{}", r.json);
    }
    s.gateway.flush().await;
    drop(redis);
    let _redis = Redis::start_on(dir.path(), port);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let mut r = s.post(Some(&bud), "/v1/completions", body()).await;
        // The connection to the old process may fail once while it reconnects.
        for _ in 0..50 {
            if r.status != 500 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            r = s.post(Some(&bud), "/v1/completions", body()).await;
        }
        statuses.push(r.status);
    }
    assert_eq!(
        statuses,
        vec![200, 429, 429, 429],
        "one request left of three"
    );
}

/// A replica that dies mid-request never settles its reservation: its concurrency lease
/// expires on its own, even for a tenant that keeps sending requests (the old shared counter
/// had its expiry refreshed by every admission, so the slot leaked for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replicas_concurrency_slot_expires_with_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path());
    let url = format!("redis://127.0.0.1:{}/", redis.port);
    let policy = format!("{PRICES}\n[tenants.t]\nmax_concurrent = 1\n");
    let s = GatewayServer::start_in_with(dir.path().into(), &policy, Some(url), |c| {
        c.lease_ttl = Duration::from_millis(1500)
    })
    .await;
    let key = s.key("t");
    let caller = s
        .gateway
        .authenticate(Some(&format!("Bearer {key}")))
        .unwrap();
    let mut plan = [pagoda_gateway::PlannedPrompt {
        prompt_tokens: 4,
        max_tokens: 4,
        n: 1,
    }];
    let admitted = s.gateway.admit(&caller, MODEL, &mut plan).await.unwrap();
    // The replica "dies": its ticket is never settled, and never dropped.
    std::mem::forget(admitted);
    let started = Instant::now();
    let mut status = 0;
    while started.elapsed() < Duration::from_secs(10) {
        status = s.post(Some(&key), "/v1/completions", body()).await.status;
        if status == 200 {
            break;
        }
        assert_eq!(status, 429);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200, "the leaked slot never came back");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "the slot came back before its lease expired"
    );
}

/// A request whose worst case is too large to account for exactly (past 2^53 nanos) is
/// refused before the script writes anything: it takes no request from the rate bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unaccountable_cost_is_refused_before_any_counter_moves() {
    let dir = tempfile::tempdir().unwrap();
    let redis = Redis::start(dir.path());
    let url = format!("redis://127.0.0.1:{}/", redis.port);
    // 100,000 per output token: one token is fine, 500 are past 2^53 nanos.
    let policy = format!(
        "[pricing.\"{MODEL}\"]\ninput = \"0\"\noutput = \"100000000000\"\n[tenants.t]\nrequests_per_minute = 1\n"
    );
    let s = GatewayServer::start_in(dir.path().into(), &policy, Some(url)).await;
    let key = s.key("t");
    let mut huge = body();
    huge["max_tokens"] = json!(500);
    let r = s.post(Some(&key), "/v1/completions", huge).await;
    assert_eq!(r.status, 400, "{}", r.json);
    assert_eq!(r.json["error"]["param"], "max_tokens");
    let mut one = body();
    one["max_tokens"] = json!(1);
    let r = s.post(Some(&key), "/v1/completions", one).await;
    assert_eq!(
        r.status, 200,
        "the refused request took the minute's one request: {}",
        r.json
    );
}
