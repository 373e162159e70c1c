//! Text as the rules see it: NFKC (full-width and look-alike compatibility forms fold to
//! plain ones), invisible characters removed, lower-cased. What was removed is counted, and
//! text smuggled in Unicode tag characters is decoded, since both are signals on their own.

use unicode_normalization::UnicodeNormalization;

pub struct Normalized {
    pub text: String,
    /// Zero-width and other invisible format characters removed.
    pub invisible: usize,
    /// Bidirectional overrides (used to show text in a different order than it is read).
    pub bidi: usize,
    /// ASCII hidden in Unicode tag characters (U+E0020..U+E007E), outside flag emoji.
    pub tag_text: String,
}

pub(crate) fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}' | '\u{200C}' | '\u{2060}' | '\u{2061}'
            ..='\u{2064}' | '\u{FEFF}' | '\u{00AD}' | '\u{180E}'
    )
}

pub(crate) fn bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// ASCII and common CJK text is already NFKC and has nothing hidden: one pass lower-cases
/// the ASCII letters. Anything else returns `None` for the full treatment.
fn fast_path(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            c if c.is_ascii() => out.push(c.to_ascii_lowercase()),
            // CJK ideographs and the CJK punctuation that NFKC leaves alone.
            '\u{4E00}'..='\u{9FFF}' | '\u{3001}'..='\u{3035}' => out.push(c),
            '\u{2014}' | '\u{2018}' | '\u{2019}' | '\u{201C}' | '\u{201D}' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

pub fn normalize(text: &str) -> Normalized {
    let mut out = Normalized {
        text: String::new(),
        invisible: 0,
        bidi: 0,
        tag_text: String::new(),
    };
    if let Some(fast) = fast_path(text) {
        out.text = fast;
        return out;
    }
    let mut kept = String::with_capacity(text.len());
    let mut after_flag = false;
    for c in text.chars() {
        match c {
            '\u{E0020}'..='\u{E007E}' => {
                if !after_flag {
                    out.tag_text.push(char::from(((c as u32) - 0xE0000) as u8));
                }
            }
            '\u{E007F}' => after_flag = false,
            // ZWJ joins emoji; it only counts when it sits between letters.
            '\u{200D}' => {
                if kept.chars().last().is_some_and(char::is_alphanumeric) {
                    out.invisible += 1;
                } else {
                    kept.push(c);
                }
            }
            c if invisible(c) => out.invisible += 1,
            c if bidi(c) => out.bidi += 1,
            c => {
                after_flag = c == '\u{1F3F4}';
                kept.push(c);
            }
        }
    }
    out.text = kept.nfkc().flat_map(char::to_lowercase).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_width_case_and_drops_invisibles() {
        let n = normalize("ＩＧＮＯＲＥ pre\u{200B}vious");
        assert_eq!(n.text, "ignore previous");
        assert_eq!(n.invisible, 1);
    }

    #[test]
    fn decodes_tag_smuggling_but_not_flags() {
        let hidden: String = "hi"
            .chars()
            .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
            .collect();
        assert_eq!(normalize(&format!("hello{hidden}")).tag_text, "hi");
        let england = "\u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}";
        assert_eq!(normalize(england).tag_text, "");
    }
}
