//! Digit runs (`4111 1111 1111 1111`, `+86 138 0013 8000`, `123-45-6789`, an 18-character
//! resident ID) split into their groups; every run of consecutive groups is tried as each
//! digit-shaped entity, longest first, so that a card followed by an unrelated number, or a
//! phone number glued to a card by one space, is still found.

use crate::entity::EntityKind;
use crate::pii::validate;

/// One group of digits (the last may end in an `X` check character) and the separator that
/// preceded it.
#[derive(Debug, Clone, Copy)]
struct Group {
    start: usize,
    end: usize,
    sep: Option<u8>,
}

/// Entities found in the digit run `text[start..end]`, as (kind, start, end) in `text`.
/// `work` counts group ranges tried, for the linearity test.
pub fn classify(
    text: &str,
    start: usize,
    end: usize,
    work: &mut u64,
) -> Vec<(EntityKind, usize, usize)> {
    let bytes = text.as_bytes();
    let plus = bytes[start] == b'+';
    let groups = split_groups(bytes, if plus { start + 1 } else { start }, end);
    let mut found = Vec::new();
    let mut i = 0;
    while i < groups.len() {
        let mut best = None;
        let mut digits = Vec::with_capacity(24);
        let mut candidates = Vec::new();
        for j in i..groups.len() {
            if j > i && groups[j].sep.is_none() {
                break;
            }
            digits.extend_from_slice(&bytes[groups[j].start..groups[j].end]);
            if digits.len() > 19 {
                break;
            }
            candidates.push((j, digits.clone()));
        }
        // Longest first: a 16-digit card beats the 11-digit phone-shaped prefix inside it.
        for (j, digits) in candidates.into_iter().rev() {
            *work += 1;
            let with_plus = plus && i == 0;
            let s = if with_plus { start } else { groups[i].start };
            let e = groups[j].end;
            if !boundary_ok(bytes, s, e) {
                continue;
            }
            if let Some(kind) = kind_of(&digits, &groups[i..=j], with_plus) {
                best = Some((kind, s, e, j));
                break;
            }
        }
        match best {
            Some((kind, s, e, j)) => {
                found.push((kind, s, e));
                i = j + 1;
            }
            None => i += 1,
        }
    }
    found
}

fn split_groups(bytes: &[u8], start: usize, end: usize) -> Vec<Group> {
    let mut groups = Vec::new();
    let mut sep = None;
    let mut i = start;
    while i < end {
        let b = bytes[i];
        if b == b' ' || b == b'-' {
            sep = Some(b);
            i += 1;
            continue;
        }
        let s = i;
        while i < end && (bytes[i].is_ascii_digit() || bytes[i] == b'X' || bytes[i] == b'x') {
            i += 1;
        }
        groups.push(Group {
            start: s,
            end: i,
            sep,
        });
        sep = None;
    }
    groups
}

/// The digit entity these groups form, if any. An `X` is only a resident-ID check character.
fn kind_of(digits: &[u8], groups: &[Group], plus: bool) -> Option<EntityKind> {
    let has_x = digits.iter().any(|d| !d.is_ascii_digit());
    if digits.len() == 18 && !plus && validate::cn_resident_id(digits) {
        return Some(EntityKind::CnId);
    }
    if has_x {
        return None;
    }
    let seps: Vec<u8> = groups.iter().skip(1).filter_map(|g| g.sep).collect();
    let one_separator = seps.windows(2).all(|w| w[0] == w[1]);
    if !plus
        && one_separator
        && (13..=19).contains(&digits.len())
        && validate::luhn(digits)
        && validate::card_network_accepts(digits)
    {
        return Some(EntityKind::Card);
    }
    if !plus && groups.len() == 3 && one_separator && digits.len() == 9 {
        let len = |g: &Group| g.end - g.start;
        if (len(&groups[0]), len(&groups[1]), len(&groups[2])) == (3, 2, 4) {
            let area = parse(&digits[0..3]);
            let group = parse(&digits[3..5]);
            let serial = parse(&digits[5..9]);
            return validate::us_ssn(area, group, serial).then_some(EntityKind::Ssn);
        }
    }
    if is_phone(digits, plus) {
        return Some(EntityKind::Phone);
    }
    None
}

fn parse(digits: &[u8]) -> u32 {
    digits
        .iter()
        .fold(0, |acc, d| acc * 10 + u32::from(d - b'0'))
}

/// Mainland-China mobile numbers (with or without +86) and E.164 numbers (with `+`).
fn is_phone(digits: &[u8], plus: bool) -> bool {
    let cn_mobile = |d: &[u8]| d.len() == 11 && d[0] == b'1' && (b'3'..=b'9').contains(&d[1]);
    if cn_mobile(digits) && !plus {
        return true;
    }
    if digits.len() == 13 && digits.starts_with(b"86") && cn_mobile(&digits[2..]) {
        return true;
    }
    plus && (8..=15).contains(&digits.len()) && digits[0] != b'0'
}

/// Not glued to a word, and not part of a decimal number or dotted version.
fn boundary_ok(bytes: &[u8], start: usize, end: usize) -> bool {
    let before_ok = match start.checked_sub(1).map(|i| bytes[i]) {
        None => true,
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => false,
        Some(b'.') | Some(b',') => !(start >= 2 && bytes[start - 2].is_ascii_digit()),
        Some(_) => true,
    };
    let after_ok = match bytes.get(end) {
        None => true,
        Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => false,
        Some(b'.') | Some(b',') => !bytes.get(end + 1).is_some_and(u8::is_ascii_digit),
        Some(_) => true,
    };
    before_ok && after_ok
}
