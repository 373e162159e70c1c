//! PII redaction over a stream of deltas.

use std::sync::Arc;

use crate::action::Action;
use crate::entity::EntityKind;
use crate::pii::PiiScanner;
use crate::redact::{apply, Applied, Placeholders};
use crate::stream::holdback::hold_start;

/// Bytes of already-sent text kept as left context, so a finding's boundary check sees the
/// same neighbour it would see in the whole text.
const CONTEXT: usize = 8;

/// Redacts entities in streamed text exactly as `apply` would on the whole text.
pub struct PiiStream {
    scanner: Arc<PiiScanner>,
    actions: Arc<dyn Fn(EntityKind) -> Action + Send + Sync>,
    pending: String,
    /// The last few bytes already sent (unredacted), for boundary checks only.
    context: String,
    pub placeholders: Placeholders,
    pub applied: Applied,
}

impl PiiStream {
    pub fn new(
        scanner: Arc<PiiScanner>,
        actions: Arc<dyn Fn(EntityKind) -> Action + Send + Sync>,
        placeholders: Placeholders,
    ) -> PiiStream {
        PiiStream {
            scanner,
            actions,
            pending: String::new(),
            context: String::new(),
            placeholders,
            applied: Applied::default(),
        }
    }

    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let hold = hold_start(&self.pending);
        self.release(hold)
    }

    pub fn finish(&mut self) -> String {
        self.release(self.pending.len())
    }

    /// Sends `pending[..hold]`, moved earlier if an entity would straddle it.
    fn release(&mut self, hold: usize) -> String {
        let ctx = self.context.len();
        let joined = format!("{}{}", self.context, self.pending);
        let mut cut = ctx + hold;
        let findings: Vec<_> = self
            .scanner
            .scan(&joined)
            .into_iter()
            .filter(|f| f.start >= ctx)
            .collect();
        if let Some(f) = findings.iter().find(|f| f.start < cut && f.end > cut) {
            cut = f.start;
        }
        let done: Vec<_> = findings
            .into_iter()
            .filter(|f| f.end <= cut)
            .map(|mut f| {
                f.start -= ctx;
                f.end -= ctx;
                f
            })
            .collect();
        let sent = &self.pending[..cut - ctx];
        let actions = self.actions.clone();
        let out = apply(sent, &done, |k| actions(k), &mut self.placeholders);
        for (k, n) in &out.counts {
            *self.applied.counts.entry(*k).or_insert(0) += n;
        }
        for k in &out.blocked {
            if !self.applied.blocked.contains(k) {
                self.applied.blocked.push(*k);
            }
        }
        self.applied.changed |= out.changed;
        let tail_start = sent.len().saturating_sub(CONTEXT);
        let tail_start = (tail_start..=sent.len())
            .find(|&i| sent.is_char_boundary(i))
            .unwrap_or(sent.len());
        if !sent.is_empty() {
            self.context = sent[tail_start..].to_string();
        }
        self.pending.drain(..cut - ctx);
        out.text
    }
}
