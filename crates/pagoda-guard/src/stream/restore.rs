//! Turning placeholders the model echoes back into the caller's original values, across
//! chunk boundaries.

use crate::redact::Placeholders;

/// Longest placeholder, `[` to `]` (`[SECRET_123]` is 12).
const MAX_PLACEHOLDER: usize = 32;

pub struct RestoreStream {
    placeholders: Placeholders,
    pending: String,
}

impl RestoreStream {
    pub fn new(placeholders: Placeholders) -> RestoreStream {
        RestoreStream {
            placeholders,
            pending: String::new(),
        }
    }

    pub fn push(&mut self, delta: &str) -> String {
        self.pending.push_str(delta);
        let hold = self.open_placeholder().unwrap_or(self.pending.len());
        let out = self.placeholders.restore(&self.pending[..hold]);
        self.pending.drain(..hold);
        out
    }

    pub fn finish(&mut self) -> String {
        let out = self.placeholders.restore(&self.pending);
        self.pending.clear();
        out
    }

    /// A trailing `[` followed only by what a placeholder could begin with.
    fn open_placeholder(&self) -> Option<usize> {
        let open = self.pending.rfind('[')?;
        let tail = &self.pending[open + 1..];
        let could_be = tail.len() < MAX_PLACEHOLDER
            && tail
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        could_be.then_some(open)
    }
}
