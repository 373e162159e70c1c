//! Checksums and format rules that turn a pattern match into a finding. Each takes the
//! matched text and answers whether it really is the entity, so that look-alikes (an order
//! number failing Luhn, an ID with a wrong check digit) are dropped.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::{SystemTime, UNIX_EPOCH};

/// Luhn (mod 10) over ASCII digits.
pub fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    !digits.is_empty() && sum.is_multiple_of(10)
}

/// Issuer prefixes and lengths of the card networks people actually carry.
pub fn card_network_accepts(digits: &[u8]) -> bool {
    let len = digits.len();
    let prefix = |n: usize| -> u32 {
        digits[..n.min(len)]
            .iter()
            .fold(0, |acc, d| acc * 10 + u32::from(d - b'0'))
    };
    let p1 = prefix(1);
    let p2 = prefix(2);
    let p3 = prefix(3);
    let p4 = prefix(4);
    match p1 {
        4 => matches!(len, 13 | 16 | 19), // Visa
        5 => match p2 {
            51..=55 => len == 16,                     // Mastercard
            50 | 56..=58 => (12..=19).contains(&len), // Maestro
            _ => false,
        },
        2 => {
            (2221..=2720).contains(&p4) && len == 16 // Mastercard 2-series
                || (2200..=2204).contains(&p4) && (16..=19).contains(&len) // Mir
        }
        3 => match p2 {
            34 | 37 => len == 15,                     // American Express
            36 | 38 | 39 => (14..=19).contains(&len), // Diners
            30 => (300..=305).contains(&p3) && (14..=19).contains(&len),
            35 => (3528..=3589).contains(&p4) && (16..=19).contains(&len), // JCB
            _ => false,
        },
        6 => {
            let discover = p4 == 6011 || (644..=649).contains(&p3) || p2 == 65;
            let unionpay = p2 == 62;
            let maestro = p2 == 67 || p2 == 63;
            (discover || unionpay || maestro) && (16..=19).contains(&len)
        }
        _ => false,
    }
}

/// Mainland-China resident ID: region, plausible birth date, ISO 7064 MOD 11-2 check digit.
pub fn cn_resident_id(id: &[u8]) -> bool {
    if id.len() != 18 || !id[..17].iter().all(u8::is_ascii_digit) {
        return false;
    }
    const PROVINCES: [u32; 35] = [
        11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51,
        52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82, 83,
    ];
    let num = |r: std::ops::Range<usize>| {
        id[r]
            .iter()
            .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'))
    };
    if !PROVINCES.contains(&num(0..2)) {
        return false;
    }
    if !plausible_birth_date(num(6..10), num(10..12), num(12..14)) {
        return false;
    }
    const WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    let sum: u32 = id[..17]
        .iter()
        .zip(WEIGHTS)
        .map(|(d, w)| u32::from(d - b'0') * w)
        .sum();
    let expected = b"10X98765432"[(sum % 11) as usize];
    id[17].to_ascii_uppercase() == expected
}

/// A real calendar date, not before 1900 and not in the future.
fn plausible_birth_date(year: u32, month: u32, day: u32) -> bool {
    if year < 1900 || year > current_year() || !(1..=12).contains(&month) || day == 0 {
        return false;
    }
    let leap = (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    day <= days
}

fn current_year() -> u32 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // Mean Gregorian year; off by at most a day around New Year, which cannot matter here.
    1970 + (secs / 31_556_952) as u32
}

/// US SSN area/group/serial rules (no 000/666/9xx area, no 00 group, no 0000 serial).
pub fn us_ssn(area: u32, group: u32, serial: u32) -> bool {
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// IBAN: the country's length and the mod-97 check.
pub fn iban(compact: &[u8]) -> bool {
    let Some(expected) = iban_length(compact) else {
        return false;
    };
    if compact.len() != expected || !compact.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    let rearranged = compact[4..].iter().chain(&compact[..4]);
    let mut rem = 0u32;
    for &c in rearranged {
        let c = c.to_ascii_uppercase();
        if c.is_ascii_digit() {
            rem = (rem * 10 + u32::from(c - b'0')) % 97;
        } else {
            rem = (rem * 100 + u32::from(c - b'A' + 10)) % 97;
        }
    }
    rem == 1
}

/// The IBAN length of the country in the first two letters, if it issues IBANs.
pub fn iban_length(compact: &[u8]) -> Option<usize> {
    const LENGTHS: [(&[u8; 2], usize); 78] = [
        (b"AD", 24),
        (b"AE", 23),
        (b"AL", 28),
        (b"AT", 20),
        (b"AZ", 28),
        (b"BA", 20),
        (b"BE", 16),
        (b"BG", 22),
        (b"BH", 22),
        (b"BR", 29),
        (b"BY", 28),
        (b"CH", 21),
        (b"CR", 22),
        (b"CY", 28),
        (b"CZ", 24),
        (b"DE", 22),
        (b"DK", 18),
        (b"DO", 28),
        (b"EE", 20),
        (b"EG", 29),
        (b"ES", 24),
        (b"FI", 18),
        (b"FO", 18),
        (b"FR", 27),
        (b"GB", 22),
        (b"GE", 22),
        (b"GI", 23),
        (b"GL", 18),
        (b"GR", 27),
        (b"GT", 28),
        (b"HR", 21),
        (b"HU", 28),
        (b"IE", 22),
        (b"IL", 23),
        (b"IQ", 23),
        (b"IS", 26),
        (b"IT", 27),
        (b"JO", 30),
        (b"KW", 30),
        (b"KZ", 20),
        (b"LB", 28),
        (b"LC", 32),
        (b"LI", 21),
        (b"LT", 20),
        (b"LU", 20),
        (b"LV", 21),
        (b"MC", 27),
        (b"MD", 24),
        (b"ME", 22),
        (b"MK", 19),
        (b"MR", 27),
        (b"MT", 31),
        (b"MU", 30),
        (b"NL", 18),
        (b"NO", 15),
        (b"PK", 24),
        (b"PL", 28),
        (b"PS", 29),
        (b"PT", 25),
        (b"QA", 29),
        (b"RO", 24),
        (b"RS", 22),
        (b"SA", 24),
        (b"SC", 31),
        (b"SE", 24),
        (b"SI", 19),
        (b"SK", 24),
        (b"SM", 27),
        (b"ST", 25),
        (b"SV", 28),
        (b"TL", 23),
        (b"TN", 24),
        (b"TR", 26),
        (b"UA", 29),
        (b"VA", 22),
        (b"VG", 24),
        (b"XK", 20),
        (b"LY", 25),
    ];
    let cc = compact.get(..2)?;
    LENGTHS
        .iter()
        .find(|(c, _)| c.as_slice() == cc)
        .map(|&(_, len)| len)
}

/// A dotted quad naming a host: `0.x.x.x` ("this network") is never one, and is how
/// version numbers such as 0.1.0.3 look.
pub fn ipv4(text: &str) -> bool {
    text.parse::<Ipv4Addr>().is_ok_and(|ip| ip.octets()[0] != 0)
}

pub fn ipv6(text: &str) -> bool {
    text.parse::<Ipv6Addr>().is_ok()
}

/// Email shape rules the pattern leaves open: local part and labels without leading,
/// trailing or doubled dots or hyphens; an alphabetic top-level domain.
pub fn email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else {
        return false;
    };
    if local.is_empty() || local.len() > 64 || domain.len() > 253 {
        return false;
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return false;
    }
    let labels: Vec<&str> = domain.split('.').collect();
    if labels.len() < 2 {
        return false;
    }
    let tld = labels[labels.len() - 1];
    if tld.len() < 2 || !tld.bytes().all(|b| b.is_ascii_alphabetic()) {
        return false;
    }
    labels
        .iter()
        .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_accepts_test_cards_and_refuses_one_digit_off() {
        assert!(luhn(b"4111111111111111"));
        assert!(luhn(b"378282246310005"));
        assert!(!luhn(b"4111111111111112"));
    }

    #[test]
    fn card_networks_know_their_prefixes() {
        assert!(card_network_accepts(b"4111111111111111"));
        assert!(card_network_accepts(b"5555555555554444"));
        assert!(card_network_accepts(b"378282246310005"));
        assert!(card_network_accepts(b"6222020000000000"));
        assert!(!card_network_accepts(b"1234567812345670"));
        assert!(!card_network_accepts(b"37828224631000"));
    }

    #[test]
    fn resident_id_checks_digit_and_date() {
        assert!(cn_resident_id(b"11010519491231002X"));
        assert!(!cn_resident_id(b"110105194912310021"));
        // Same body with a 13th month: the check digit cannot save it.
        assert!(!cn_resident_id(b"110105194913310028"));
        assert!(!cn_resident_id(b"99010519491231002X"));
    }

    #[test]
    fn ssn_rules() {
        assert!(us_ssn(123, 45, 6789));
        assert!(!us_ssn(666, 45, 6789));
        assert!(!us_ssn(900, 45, 6789));
        assert!(!us_ssn(123, 0, 6789));
        assert!(!us_ssn(123, 45, 0));
    }

    #[test]
    fn iban_checks_length_and_mod97() {
        assert!(iban(b"GB82WEST12345698765432"));
        assert!(iban(b"DE89370400440532013000"));
        assert!(!iban(b"GB82WEST12345698765433"));
        assert!(!iban(b"GB82WEST1234569876543"));
    }

    #[test]
    fn email_rules() {
        assert!(email("jane.doe@example.com"));
        assert!(!email("jane..doe@example.com"));
        assert!(!email("jane@example.c0m"));
        assert!(!email("jane@-example.com"));
    }
}
