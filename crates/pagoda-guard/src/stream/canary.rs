//! Looking for the system prompt's canary in streamed output.

use crate::stream::holdback::partial_suffix;

/// What is sent instead of a leaked canary when the policy redacts rather than ends.
pub const CANARY_REDACTED: &str = "[REDACTED]";

pub struct CanaryStream {
    canary: String,
    pending: String,
    pub leaked: bool,
}

impl CanaryStream {
    pub fn new(canary: String) -> CanaryStream {
        CanaryStream {
            canary,
            pending: String::new(),
            leaked: false,
        }
    }

    /// Text that may be sent, with every canary replaced; `leaked` is set once one was seen.
    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let replaced = self.replace_all();
        let hold = replaced.len() - partial_suffix(&replaced, &self.canary);
        self.pending = replaced[hold..].to_string();
        replaced[..hold].to_string()
    }

    pub fn finish(&mut self) -> String {
        let out = self.replace_all();
        self.pending.clear();
        out
    }

    fn replace_all(&mut self) -> String {
        if self.pending.contains(&self.canary) {
            self.leaked = true;
            return self.pending.replace(&self.canary, CANARY_REDACTED);
        }
        self.pending.clone()
    }
}
