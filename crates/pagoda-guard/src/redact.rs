//! Applying actions to findings, with placeholders numbered per request.

use std::collections::{BTreeMap, HashMap};

use crate::action::Action;
use crate::entity::EntityKind;
use crate::mask::mask;
use crate::pii::Finding;

/// The placeholders of one request: the same value always gets the same placeholder, and
/// each placeholder can be turned back into its value. Held in memory for the request only.
#[derive(Debug, Default, Clone)]
pub struct Placeholders {
    by_value: HashMap<(EntityKind, String), String>,
    by_placeholder: HashMap<String, String>,
    next: BTreeMap<EntityKind, usize>,
}

impl Placeholders {
    pub fn placeholder_for(&mut self, kind: EntityKind, value: &str) -> String {
        if let Some(p) = self.by_value.get(&(kind, value.to_string())) {
            return p.clone();
        }
        let n = self.next.entry(kind).or_insert(0);
        *n += 1;
        let p = format!("[{}_{}]", kind.name(), n);
        self.by_value.insert((kind, value.to_string()), p.clone());
        self.by_placeholder.insert(p.clone(), value.to_string());
        p
    }

    /// The original value behind a placeholder this request handed out.
    pub fn original(&self, placeholder: &str) -> Option<&str> {
        self.by_placeholder.get(placeholder).map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.by_placeholder.is_empty()
    }

    /// Replaces every known placeholder in `text`.
    pub fn restore(&self, text: &str) -> String {
        if self.is_empty() || !text.contains('[') {
            return text.to_string();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find('[') {
            out.push_str(&rest[..open]);
            let tail = &rest[open..];
            let close = tail.find(']').filter(|&c| c <= 32);
            match close.and_then(|c| self.original(&tail[..=c]).map(|o| (c, o))) {
                Some((c, original)) => {
                    out.push_str(original);
                    rest = &tail[c + 1..];
                }
                None => {
                    out.push('[');
                    rest = &tail[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// What applying actions did to one text: entity counts and the types that block.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub text: String,
    pub counts: BTreeMap<EntityKind, usize>,
    pub blocked: Vec<EntityKind>,
    pub changed: bool,
}

/// Rewrites `text` by the actions; `Block` entities are listed and, in case the caller goes on
/// (outputs cannot be refused any more), redacted.
pub fn apply(
    text: &str,
    findings: &[Finding],
    action_for: impl Fn(EntityKind) -> Action,
    placeholders: &mut Placeholders,
) -> Applied {
    let mut applied = Applied::default();
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in findings {
        *applied.counts.entry(f.kind).or_insert(0) += 1;
        let value = &text[f.start..f.end];
        let replacement = match action_for(f.kind) {
            Action::Allow => continue,
            Action::Mask => mask(f.kind, value),
            Action::Redact => placeholders.placeholder_for(f.kind, value),
            Action::Block => {
                if !applied.blocked.contains(&f.kind) {
                    applied.blocked.push(f.kind);
                }
                placeholders.placeholder_for(f.kind, value)
            }
        };
        out.push_str(&text[last..f.start]);
        out.push_str(&replacement);
        last = f.end;
        applied.changed = true;
    }
    out.push_str(&text[last..]);
    applied.text = out;
    applied
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pii::PiiScanner;

    #[test]
    fn the_same_value_gets_the_same_placeholder() {
        let text = "a@example.com, b@example.com, a@example.com";
        let findings = PiiScanner::new().scan(text);
        let mut p = Placeholders::default();
        let out = apply(text, &findings, |_| Action::Redact, &mut p);
        assert_eq!(out.text, "[EMAIL_1], [EMAIL_2], [EMAIL_1]");
        assert_eq!(out.counts[&EntityKind::Email], 3);
        assert_eq!(p.restore("write to [EMAIL_2]"), "write to b@example.com");
    }

    #[test]
    fn unknown_placeholders_and_brackets_stay() {
        let mut p = Placeholders::default();
        p.placeholder_for(EntityKind::Email, "a@example.com");
        assert_eq!(
            p.restore("[EMAIL_9] [x] [EMAIL_1]"),
            "[EMAIL_9] [x] a@example.com"
        );
    }

    #[test]
    fn block_lists_types_once() {
        let text = "4111 1111 1111 1111 and 5555 5555 5555 4444";
        let findings = PiiScanner::new().scan(text);
        let out = apply(
            text,
            &findings,
            |_| Action::Block,
            &mut Placeholders::default(),
        );
        assert_eq!(out.blocked, vec![EntityKind::Card]);
        assert!(!out.text.contains("4111"));
    }
}
