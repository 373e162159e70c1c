//! Anchoring the audit log in the gateway database: every `every` while serving, and once at
//! shutdown, the log's head (last sequence number and hash) is recorded there when it moved,
//! so `pagoda audit verify --anchors` can tell a log that was cut short.

use std::sync::Arc;
use std::time::Duration;

use pagoda_gateway::AuditAnchors;

use crate::guard::ServerGuard;

pub struct Anchoring {
    anchors: AuditAnchors,
    guard: Arc<ServerGuard>,
    last: std::sync::Mutex<u64>,
}

impl Anchoring {
    pub fn new(anchors: AuditAnchors, guard: Arc<ServerGuard>) -> Arc<Anchoring> {
        Arc::new(Anchoring {
            anchors,
            guard,
            last: std::sync::Mutex::new(0),
        })
    }

    /// Records the head if it moved since the last anchor.
    pub fn anchor(&self) {
        let Some((path, seq, hash)) = self.guard.audit_head() else {
            return;
        };
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if seq == 0 || seq == *last {
            return;
        }
        let log = log_name(&path);
        match self
            .anchors
            .record(&log, seq, &hash, pagoda_gateway::clock::now_ms())
        {
            Ok(()) => *last = seq,
            Err(e) => tracing::error!(error = %e, "cannot anchor the audit log"),
        }
    }

    /// Anchors every `every` until the task is aborted.
    pub fn spawn(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let this = this.clone();
                let _ = tokio::task::spawn_blocking(move || this.anchor()).await;
            }
        })
    }
}

/// The name anchors are kept under: the log's absolute path.
pub fn log_name(path: &std::path::Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .to_string_lossy()
        .into_owned()
}
