//! The whole output filter of one choice: canary, then PII, then placeholder restore.
//! Restoring last means values the caller sent come back intact while new PII the model
//! produced is still redacted.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::action::Action;
use crate::entity::EntityKind;
use crate::pii::PiiScanner;
use crate::redact::Placeholders;
use crate::stream::{CanaryStream, OverlapStream, PiiStream, PromptWindows, RestoreStream};

/// Text to send now; `stop` asks the caller to end the response (a canary leaked and the
/// policy ends responses on leaks).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Emitted {
    pub text: String,
    pub stop: bool,
}

/// What the filter saw, for the audit log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct OutputReport {
    pub counts: BTreeMap<EntityKind, usize>,
    pub canary_leaked: bool,
    /// The output repeated a long stretch of the system prompt (`stream/overlap.rs`).
    pub prompt_leaked: bool,
    pub restored: bool,
}

pub struct OutputGuard {
    canary: Option<CanaryStream>,
    end_on_leak: bool,
    overlap: Option<OverlapStream>,
    pii: Option<PiiStream>,
    restore: Option<RestoreStream>,
    stopped: bool,
}

impl OutputGuard {
    /// `canary`: the string to look for; `actions`: per type on output (`Block` redacts);
    /// `restore`: the request's placeholders to put back, when the tenant asks for it.
    pub fn new(
        scanner: Arc<PiiScanner>,
        canary: Option<String>,
        end_on_leak: bool,
        actions: Option<Arc<dyn Fn(EntityKind) -> Action + Send + Sync>>,
        restore: Option<Placeholders>,
    ) -> OutputGuard {
        let placeholders = restore.clone().unwrap_or_default();
        OutputGuard {
            canary: canary.map(CanaryStream::new),
            end_on_leak,
            overlap: None,
            pii: actions.map(|a| PiiStream::new(scanner, a, placeholders)),
            restore: restore.map(RestoreStream::new),
            stopped: false,
        }
    }

    /// Also ends the response when the output recites the system prompt.
    pub fn with_prompt_overlap(mut self, prompt: Option<Arc<PromptWindows>>) -> OutputGuard {
        self.overlap = prompt.map(OverlapStream::new);
        self
    }

    pub fn push(&mut self, delta: &str) -> Emitted {
        if self.stopped {
            return Emitted {
                text: String::new(),
                stop: true,
            };
        }
        if let Some(o) = &mut self.overlap {
            let allowed = o.push(delta);
            if o.leaked {
                // What comes before the recitation goes through the other stages; what they
                // hold back may be part of it and is dropped.
                let mut head = self.push_stages(allowed);
                self.stopped = true;
                head.stop = true;
                return head;
            }
        }
        self.push_stages(delta)
    }

    fn push_stages(&mut self, delta: &str) -> Emitted {
        let mut text = match &mut self.canary {
            Some(c) => c.push(delta),
            None => delta.to_string(),
        };
        if self.end_on_leak && self.canary.as_ref().is_some_and(|c| c.leaked) {
            return self.stop_now();
        }
        if let Some(p) = &mut self.pii {
            text = p.push(&text);
        }
        if let Some(r) = &mut self.restore {
            text = r.push(&text);
        }
        Emitted { text, stop: false }
    }

    /// Releases everything held back.
    pub fn finish(&mut self) -> Emitted {
        if self.stopped {
            return Emitted {
                text: String::new(),
                stop: true,
            };
        }
        let mut text = match &mut self.canary {
            Some(c) => c.finish(),
            None => String::new(),
        };
        if self.end_on_leak && self.canary.as_ref().is_some_and(|c| c.leaked) {
            return self.stop_now();
        }
        if let Some(p) = &mut self.pii {
            text = p.push(&text);
            text.push_str(&p.finish());
        }
        if let Some(r) = &mut self.restore {
            text = r.push(&text);
            text.push_str(&r.finish());
        }
        Emitted { text, stop: false }
    }

    /// Filters a whole (non-streamed) output at once.
    pub fn filter_all(&mut self, text: &str) -> Emitted {
        let mut first = self.push(text);
        if first.stop {
            return first;
        }
        let rest = self.finish();
        first.text.push_str(&rest.text);
        first.stop = rest.stop;
        first
    }

    fn stop_now(&mut self) -> Emitted {
        // What was held back may contain the start of the leak; drop it.
        self.stopped = true;
        Emitted {
            text: String::new(),
            stop: true,
        }
    }

    pub fn report(&self) -> OutputReport {
        OutputReport {
            counts: self
                .pii
                .as_ref()
                .map(|p| p.applied.counts.clone())
                .unwrap_or_default(),
            canary_leaked: self.canary.as_ref().is_some_and(|c| c.leaked),
            prompt_leaked: self.overlap.as_ref().is_some_and(|o| o.leaked),
            restored: self.restore.is_some(),
        }
    }
}
