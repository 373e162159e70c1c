//! What the picker knows of each replica: readiness and load from `/health` and `/metrics`,
//! polled; cached blocks from its KV events, streamed.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zeromq::{Socket, SocketRecv, SubSocket};

use crate::kv_index;

/// A replica: its HTTP address and, for prefix scoring, its KV-event PUB endpoint.
#[derive(Clone, Debug)]
pub struct Pod {
    pub http: SocketAddr,
    pub kv_events: Option<String>,
}

/// The load figures the scorers read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PodSnapshot {
    /// `/health` answered 200 at the last probe (not loading, not draining, reachable).
    pub ready: bool,
    /// Requests waiting or running: on a CPU every running request slows the others, so
    /// running ones count as queue too (llm-d's queue scorer reads the waiting gauge alone).
    pub queue: f64,
    pub kv_usage: f64,
}

#[derive(Default)]
struct PodState {
    snapshot: PodSnapshot,
    blocks: HashSet<u64>,
}

pub struct Pods {
    pods: Vec<Pod>,
    state: Vec<Mutex<PodState>>,
    client: reqwest::Client,
}

impl Pods {
    /// Starts probing every `probe_every` and subscribing to the KV events.
    pub async fn start(pods: Vec<Pod>, probe_every: Duration) -> Arc<Pods> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("a plain HTTP client builds");
        let state = pods.iter().map(|_| Mutex::default()).collect();
        let this = Arc::new(Pods {
            pods,
            state,
            client,
        });
        for i in 0..this.pods.len() {
            tokio::spawn(probe(this.clone(), i, probe_every));
            if let Some(endpoint) = this.pods[i].kv_events.clone() {
                let mut socket = SubSocket::new();
                if socket.connect(&endpoint).await.is_ok() && socket.subscribe("").await.is_ok() {
                    tokio::spawn(follow_events(this.clone(), i, socket));
                }
            }
        }
        this
    }

    pub fn len(&self) -> usize {
        self.pods.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    pub fn addr(&self, i: usize) -> SocketAddr {
        self.pods[i].http
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub fn snapshots(&self) -> Vec<PodSnapshot> {
        self.state.iter().map(|s| lock(s).snapshot).collect()
    }

    /// For each replica, how many of `hashes` (a request's blocks, in order) it holds from the
    /// first on.
    pub fn matched(&self, hashes: &[u64]) -> Vec<usize> {
        self.state
            .iter()
            .map(|s| {
                let state = lock(s);
                hashes
                    .iter()
                    .take_while(|h| state.blocks.contains(h))
                    .count()
            })
            .collect()
    }

    /// Takes a replica out until its next successful probe (it refused a connection).
    pub fn mark_down(&self, i: usize) {
        lock(&self.state[i]).snapshot.ready = false;
    }
}

fn lock(state: &Mutex<PodState>) -> std::sync::MutexGuard<'_, PodState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

async fn probe(pods: Arc<Pods>, i: usize, every: Duration) {
    let base = format!("http://{}", pods.pods[i].http);
    loop {
        let snapshot = read_load(&pods.client, &base).await.unwrap_or_default();
        lock(&pods.state[i]).snapshot = snapshot;
        tokio::time::sleep(every).await;
    }
}

/// Ready when `/health` is 200; then the queue and KV usage from `/metrics`.
async fn read_load(client: &reqwest::Client, base: &str) -> Option<PodSnapshot> {
    let health = client.get(format!("{base}/health")).send().await.ok()?;
    if !health.status().is_success() {
        return None;
    }
    let text = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(PodSnapshot {
        ready: true,
        queue: gauge(&text, "pagoda:num_requests_waiting").unwrap_or(0.0)
            + gauge(&text, "pagoda:num_requests_running").unwrap_or(0.0),
        kv_usage: gauge(&text, "pagoda:kv_cache_usage_perc").unwrap_or(0.0),
    })
}

/// The value of the first sample of `name` (with or without labels).
fn gauge(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

async fn follow_events(pods: Arc<Pods>, i: usize, mut socket: SubSocket) {
    while let Ok(message) = socket.recv().await {
        if let Some(payload) = message.get(2) {
            kv_index::apply(&mut lock(&pods.state[i]).blocks, payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gauges_are_read_with_or_without_labels() {
        let text = "# HELP x\npagoda:num_requests_waiting_total 9\npagoda:num_requests_waiting{model_name=\"m\"} 3\npagoda:kv_cache_usage_perc 0.25\n";
        assert_eq!(gauge(text, "pagoda:num_requests_waiting"), Some(3.0));
        assert_eq!(gauge(text, "pagoda:kv_cache_usage_perc"), Some(0.25));
        assert_eq!(gauge(text, "pagoda:missing"), None);
    }
}
