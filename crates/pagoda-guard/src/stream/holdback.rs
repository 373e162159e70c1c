//! Where the unsent tail of a stream must begin so that no entity is cut in two.

use crate::pii::fold::fold;
use crate::pii::MAX_CANDIDATE_BYTES;

/// PEM blocks are followed up to this far before the held text is released anyway.
const PEM_LIMIT: usize = 16 * 1024;

/// The start of the suffix of `text` that could still grow into an entity: the trailing run
/// of characters entities are made of, extended backwards over single separators between
/// digit groups, short upper-case groups (IBANs), `Bearer` and `key:`-style prefixes; an open
/// PEM block holds from its header.
/// Computed on the folded text (as the scanner reads it), so full-width digits hold too.
pub fn hold_start(text: &str) -> usize {
    match fold(text) {
        Some(folded) => folded.original_at(hold_start_plain(&folded.text), text.len()),
        None => hold_start_plain(text),
    }
}

fn hold_start_plain(text: &str) -> usize {
    let bytes = text.as_bytes();
    let floor = text.len().saturating_sub(MAX_CANDIDATE_BYTES);
    let mut p = run_start(bytes, text.len());
    while p > floor && p >= 2 && matches!(bytes[p - 1], b' ' | b'-' | b'\t') {
        let q = run_start(bytes, p - 1);
        let token = &bytes[q..p - 1];
        let continues = !token.is_empty()
            && (token
                .strip_prefix(b"+")
                .unwrap_or(token)
                .iter()
                .all(u8::is_ascii_digit)
                || token.len() <= 4
                    && token
                        .iter()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
                || token.ends_with(b"earer")
                || token.ends_with(b":")
                || token.ends_with(b"="));
        if !continues {
            break;
        }
        p = q;
    }
    let mut hold = p.max(floor);
    if let Some(pem) = open_pem(text) {
        hold = hold.min(pem);
    }
    while !text.is_char_boundary(hold) {
        hold -= 1;
    }
    hold
}

fn entity_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"@._%+-:/=~!#$^&*\"'".contains(&b)
}

/// Start of the run of entity bytes ending at `end`.
fn run_start(bytes: &[u8], end: usize) -> usize {
    let mut p = end;
    while p > 0 && entity_byte(bytes[p - 1]) && end - p < MAX_CANDIDATE_BYTES {
        p -= 1;
    }
    p
}

/// A `-----BEGIN` with no `-----END` after it, not too far back.
fn open_pem(text: &str) -> Option<usize> {
    let from = text.len().saturating_sub(PEM_LIMIT);
    let from = (from..=text.len()).find(|&i| text.is_char_boundary(i))?;
    let window = &text[from..];
    let begin = window.rfind("-----BEGIN")?;
    let after = &window[begin..];
    let closed = after
        .find("-----END")
        .is_some_and(|end| after[end + 8..].contains("-----"));
    (!closed).then_some(from + begin)
}

/// The longest suffix of `text` that is a proper prefix of `needle`.
pub fn partial_suffix(text: &str, needle: &str) -> usize {
    let max = needle.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&k| {
            text.is_char_boundary(text.len() - k) && needle.starts_with(&text[text.len() - k..])
        })
        .unwrap_or(0)
}
