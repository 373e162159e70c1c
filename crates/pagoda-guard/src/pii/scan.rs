//! The scanner: candidates from the one pattern, validated per family.

use regex::{CaptureLocations, Regex};

use crate::entity::EntityKind;
use crate::pii::{digits, fold, patterns, validate};

/// One entity found: its kind and byte range. The value itself is never copied out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    pub kind: EntityKind,
    pub start: usize,
    pub end: usize,
}

/// Work done by one scan, counted for tests that check linear time without a clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanWork {
    /// Regex searches started.
    pub searches: u64,
    /// Bytes the validators looked at.
    pub validated_bytes: u64,
    /// Digit-group ranges tried.
    pub digit_ranges: u64,
}

impl ScanWork {
    pub fn total(&self) -> u64 {
        self.searches + self.validated_bytes + self.digit_ranges
    }
}

/// Finds personal data and secrets. Build once and share: the compiled pattern is immutable.
#[derive(Debug, Clone)]
pub struct PiiScanner {
    re: Regex,
}

impl Default for PiiScanner {
    fn default() -> Self {
        PiiScanner::new()
    }
}

impl PiiScanner {
    pub fn new() -> PiiScanner {
        PiiScanner {
            re: patterns::build(),
        }
    }

    /// Every validated entity in `text`, in order, not overlapping.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        self.scan_counted(text).0
    }

    /// Scans the folded text (`fold.rs`) and reports spans of the original: a card number
    /// written with full-width digits or no-break spaces is still a card number.
    pub fn scan_counted(&self, text: &str) -> (Vec<Finding>, ScanWork) {
        let Some(folded) = fold::fold(text) else {
            return self.scan_plain(text);
        };
        let (mut found, work) = self.scan_plain(&folded.text);
        for f in &mut found {
            (f.start, f.end) = folded.original(f.start, f.end);
        }
        (found, work)
    }

    fn scan_plain(&self, text: &str) -> (Vec<Finding>, ScanWork) {
        let mut work = ScanWork::default();
        let mut found = Vec::new();
        let mut locs = self.re.capture_locations();
        let mut pos = 0;
        while pos < text.len() {
            work.searches += 1;
            let Some(m) = self.re.captures_read_at(&mut locs, text, pos) else {
                break;
            };
            let (start, end) = (m.start(), m.end());
            work.validated_bytes += (end - start) as u64;
            let before = found.len();
            let (next, exhaustive) = self.candidate(text, &locs, start, end, &mut found, &mut work);
            // A candidate that validated moves past itself, and so does one whose validator
            // already tried every place an entity could start inside it. Others may hide a
            // real entity starting inside them: the search resumes one character later. Each
            // candidate is bounded in length, so either way the total work stays linear.
            pos = if found.len() > before || exhaustive {
                next
            } else {
                next_char(text, start)
            };
        }
        (found, work)
    }

    /// Validates one candidate; returns where the next search may start after a success,
    /// and whether every start inside the candidate has been tried already.
    fn candidate(
        &self,
        text: &str,
        locs: &CaptureLocations,
        start: usize,
        end: usize,
        found: &mut Vec<Finding>,
        work: &mut ScanWork,
    ) -> (usize, bool) {
        let group = (1..=patterns::DIGITS)
            .find(|&g| locs.get(g).is_some())
            .unwrap_or(patterns::DIGITS);
        let bytes = text.as_bytes();
        let mut push = |kind, s, e| {
            found.push(Finding {
                kind,
                start: s,
                end: e,
            })
        };
        match group {
            patterns::EMAIL => {
                if word_boundaries(bytes, start, end) && validate::email(&text[start..end]) {
                    push(EntityKind::Email, start, end);
                }
                (end, false)
            }
            patterns::SECRET => {
                if let Some((s, e)) = secret_span(text, start, end) {
                    push(EntityKind::Secret, s, e);
                }
                (end, false)
            }
            patterns::PEM => {
                let e = pem_end(text, end);
                work.validated_bytes += (e - end) as u64;
                push(EntityKind::Secret, start, e);
                (e, true)
            }
            patterns::IBAN => match iban_span(bytes, start, end) {
                Some(e) => {
                    push(EntityKind::Iban, start, e);
                    (e, true)
                }
                None => (end, false),
            },
            patterns::IPV6 => {
                // Every start after a colon is tried, so runs of colons cost one pass.
                let mut s = start;
                loop {
                    if let Some(e) = ipv6_at(text, s, end) {
                        work.validated_bytes += (e - s) as u64;
                        push(EntityKind::Ip, s, e);
                        return (e, true);
                    }
                    match text[s..end].find(':') {
                        Some(i) if s + i + 1 < end => s += i + 1,
                        _ => return (end, true),
                    }
                }
            }
            patterns::IPV4 => {
                if ipv4_context_ok(bytes, start, end) && validate::ipv4(&text[start..end]) {
                    push(EntityKind::Ip, start, end);
                }
                // A dotted quad cannot start inside another one's digits or dots.
                (end, true)
            }
            _ => {
                // Every group boundary in the run is tried, and nothing can start mid-group
                // (it would be glued to a digit), so the run is done with.
                for (kind, s, e) in digits::classify(text, start, end, &mut work.digit_ranges) {
                    push(kind, s, e);
                }
                (end, true)
            }
        }
    }
}

/// An IPv6 address starting at `s` and ending by `end` (trailing colons trimmed).
fn ipv6_at(text: &str, s: usize, end: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut e = end;
    while e > s && bytes[e - 1] == b':' && !text[s..e].ends_with("::") {
        e -= 1;
    }
    let colons = bytes[s..e].iter().filter(|&&b| b == b':').count();
    (colons >= 2 && word_boundaries(bytes, s, e) && validate::ipv6(&text[s..e])).then_some(e)
}

fn next_char(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map_or(text.len(), |c| at + c.len_utf8())
}

fn word_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn word_boundaries(bytes: &[u8], start: usize, end: usize) -> bool {
    let before = start == 0 || !word_char(bytes[start - 1]);
    let after = bytes.get(end).is_none_or(|&b| !word_char(b));
    before && after
}

/// The secret's value: a `Bearer` or `password=` prefix stays readable; keys need both
/// letters and digits so that hyphenated words (`sk-learn-...`) are not keys.
fn secret_span(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    if !word_boundaries(bytes, start, end) && !text[start..end].contains(['=', ':']) {
        return None;
    }
    let matched = &text[start..end];
    let value_start = if matched.starts_with(['B', 'b']) && matched[1..].starts_with("earer") {
        start + 6 + matched[6..].len() - matched[6..].trim_start().len()
    } else if let Some(i) = matched
        .find([':', '='])
        .filter(|_| !matched.starts_with("eyJ"))
    {
        let rest = &matched[i + 1..];
        let skip = rest.len() - rest.trim_start_matches([' ', '\t', '"', '\'']).len();
        start + i + 1 + skip
    } else {
        start
    };
    let value = &text[value_start..end];
    // Keys with a vendor prefix are specific enough; base32 AWS ids may hold no digit.
    const PREFIXED: [&str; 12] = [
        "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "gh", "xox", "AIza", "eyJ",
    ];
    if PREFIXED.iter().any(|p| value.starts_with(p)) {
        return Some((value_start, end));
    }
    let letters = value.bytes().any(|b| b.is_ascii_alphabetic());
    let digits = value.bytes().any(|b| b.is_ascii_digit());
    (letters && digits && value.len() >= 8).then_some((value_start, end))
}

/// The end of a PEM private-key block: its END line, else the end of the base64 body.
fn pem_end(text: &str, header_end: usize) -> usize {
    const LIMIT: usize = 16 * 1024;
    let window_end = floor_char(text, (header_end + LIMIT).min(text.len()));
    let window = &text[header_end..window_end];
    if let Some(i) = window.find("-----END ") {
        if let Some(j) = window[i..].find("PRIVATE KEY-----") {
            return header_end + i + j + "PRIVATE KEY-----".len();
        }
    }
    let body = window
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || b"+/=\r\n \t-".contains(b))
        .count();
    header_end + body
}

pub(crate) fn floor_char(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The IBAN inside the candidate: the country's length of alphanumerics, check digits valid.
fn iban_span(bytes: &[u8], start: usize, end: usize) -> Option<usize> {
    if start > 0 && word_char(bytes[start - 1]) {
        return None;
    }
    let expected = validate::iban_length(&bytes[start..end])?;
    let mut compact = Vec::with_capacity(expected);
    let mut e = start;
    for (i, &b) in bytes[start..end].iter().enumerate() {
        if b != b' ' {
            compact.push(b);
            if compact.len() == expected {
                e = start + i + 1;
                break;
            }
        }
    }
    let after_ok = bytes.get(e).is_none_or(|&b| !word_char(b));
    (compact.len() == expected && after_ok && validate::iban(&compact)).then_some(e)
}

/// Dotted quads that are versions (`v1.2.3.4`, `version 10.0.0.1`) or longer dotted numbers
/// are not addresses.
fn ipv4_context_ok(bytes: &[u8], start: usize, end: usize) -> bool {
    if start > 0 && (word_char(bytes[start - 1]) || bytes[start - 1] == b'.') {
        return false;
    }
    if let Some(&b) = bytes.get(end) {
        if word_char(b) || (b == b'.' && bytes.get(end + 1).is_some_and(u8::is_ascii_digit)) {
            return false;
        }
    }
    let from = start.saturating_sub(24);
    let before = String::from_utf8_lossy(&bytes[from..start]).to_lowercase();
    let before = before.trim_end_matches([' ', ':', '=', '\t']);
    const VERSION_WORDS: [&str; 9] = [
        "version",
        "ver",
        "ver.",
        "v",
        "release",
        "build",
        "firmware",
        "版本",
        "版本号",
    ];
    !VERSION_WORDS.iter().any(|w| {
        before.ends_with(w) && {
            let rest = &before[..before.len() - w.len()];
            rest.is_empty() || !rest.ends_with(|c: char| c.is_ascii_alphanumeric())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(EntityKind, &str)> {
        PiiScanner::new()
            .scan(text)
            .into_iter()
            .map(|f| (f.kind, &text[f.start..f.end]))
            .collect()
    }

    #[test]
    fn finds_each_kind_in_prose() {
        let text =
            "Mail jane.doe@example.com or call +86 138 0013 8000; card 4111 1111 1111 1111, \
                    SSN 123-45-6789, IBAN GB82 WEST 1234 5698 7654 32, host 10.0.0.12, \
                    ID 11010519491231002X, key AKIAIOSFODNN7EXAMPLE.";
        let got: Vec<EntityKind> = kinds(text).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            got,
            vec![
                EntityKind::Email,
                EntityKind::Phone,
                EntityKind::Card,
                EntityKind::Ssn,
                EntityKind::Iban,
                EntityKind::Ip,
                EntityKind::CnId,
                EntityKind::Secret
            ]
        );
    }

    #[test]
    fn an_order_number_failing_luhn_is_not_a_card() {
        assert!(kinds("order 4111 1111 1111 1112 shipped").is_empty());
    }

    #[test]
    fn a_version_string_is_not_an_address() {
        assert!(kinds("upgrade to version 1.2.3.4 today").is_empty());
        assert!(kinds("build v10.0.0.1").is_empty());
        assert_eq!(kinds("ping 1.2.3.4 now").len(), 1);
    }

    #[test]
    fn chinese_text_around_a_number_is_a_boundary() {
        let got = kinds("我的手机号是13800138000，身份证号11010519491231002X。");
        assert_eq!(got[0], (EntityKind::Phone, "13800138000"));
        assert_eq!(got[1], (EntityKind::CnId, "11010519491231002X"));
    }

    #[test]
    fn a_card_glued_to_a_phone_by_a_space_is_split() {
        let got = kinds("13800138000 4111 1111 1111 1111");
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1], (EntityKind::Card, "4111 1111 1111 1111"));
    }

    #[test]
    fn bearer_keeps_its_prefix_readable() {
        let got = kinds("Authorization: Bearer abcdef0123456789ABCDEF");
        assert_eq!(got, vec![(EntityKind::Secret, "abcdef0123456789ABCDEF")]);
    }

    #[test]
    fn pem_block_is_one_secret() {
        let text = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END RSA PRIVATE KEY-----\nthanks";
        let got = kinds(text);
        assert_eq!(got.len(), 1);
        assert!(got[0].1.ends_with("END RSA PRIVATE KEY-----"));
    }

    #[test]
    fn look_alike_digits_spaces_and_invisibles_do_not_hide_an_entity() {
        let nbsp = "card 4111\u{00A0}1111\u{00A0}1111\u{00A0}1111 ok";
        assert_eq!(
            kinds(nbsp),
            vec![(EntityKind::Card, "4111\u{00A0}1111\u{00A0}1111\u{00A0}1111")]
        );
        let wide = "card ４１１１ １１１１ １１１１ １１１１.";
        assert_eq!(
            kinds(wide),
            vec![(EntityKind::Card, "４１１１ １１１１ １１１１ １１１１")]
        );
        let zwsp = "mail jane.doe\u{200B}@example.com now";
        assert_eq!(
            kinds(zwsp),
            vec![(EntityKind::Email, "jane.doe\u{200B}@example.com")]
        );
    }
}
