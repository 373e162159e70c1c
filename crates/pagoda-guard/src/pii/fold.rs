//! Text as the PII scanner sees it: look-alikes folded as the injection rules fold them
//! (NFKC, so full-width digits become plain ones; any space a space; invisible format
//! characters dropped), with a map from every folded byte back to the original text, so that a finding
//! in the folded text redacts the right span of what the client sent.

use unicode_normalization::UnicodeNormalization;

use crate::inject::normalize::{bidi, invisible};

/// Folded text and, per folded byte, the original span of the character it came from.
pub struct Folded {
    pub text: String,
    origin: Vec<(u32, u32)>,
}

impl Folded {
    /// The original byte range of the folded range `start..end` (non-empty).
    pub fn original(&self, start: usize, end: usize) -> (usize, usize) {
        let s = self.origin[start].0 as usize;
        let e = self.origin[end - 1].1 as usize;
        (s, e)
    }

    /// The original offset of folded offset `at` (the end maps to the end).
    pub fn original_at(&self, at: usize, original_len: usize) -> usize {
        self.origin.get(at).map_or(original_len, |o| o.0 as usize)
    }
}

/// The plain character a look-alike stands for: any space is a space, and a compatibility
/// form of a letter, digit or `@ . - + _` is that character. Other punctuation stays as it is
/// (a full-width colon is not a `:` that could start an address or a key).
fn fold_char(c: char) -> char {
    if c.is_whitespace() {
        return ' ';
    }
    let mut nfkc = std::iter::once(c).nfkc();
    match (nfkc.next(), nfkc.next()) {
        (Some(a), None) if a.is_ascii_alphanumeric() || "@.-+_".contains(a) => a,
        _ => c,
    }
}

/// `None` when folding changes nothing (plain ASCII, the common case).
pub fn fold(text: &str) -> Option<Folded> {
    if text.is_ascii() {
        return None;
    }
    let mut out = Folded {
        text: String::with_capacity(text.len()),
        origin: Vec::with_capacity(text.len()),
    };
    let mut changed = false;
    for (at, c) in text.char_indices() {
        let span = (at as u32, (at + c.len_utf8()) as u32);
        if invisible(c) || bidi(c) || c == '\u{200D}' {
            changed = true;
            continue;
        }
        let before = out.text.len();
        let folded = if c.is_ascii() { c } else { fold_char(c) };
        changed |= folded != c;
        out.text.push(folded);
        out.origin
            .extend(std::iter::repeat_n(span, out.text.len() - before));
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_folded_spans_back_to_the_original() {
        let text = "card ４１１１\u{00A0}1";
        let f = fold(text).unwrap();
        assert_eq!(f.text, "card 4111 1");
        let (s, e) = f.original(5, 11);
        assert_eq!(&text[s..e], "４１１１\u{00A0}1");
        assert!(fold("plain ascii").is_none());
        assert!(fold("café").is_none(), "already NFKC");
        let f = fold("a\u{200B}@b").unwrap();
        assert_eq!(f.text, "a@b");
        assert_eq!(f.original(0, 3), (0, "a\u{200B}@b".len()));
    }
}
