//! The one regex every text is scanned with. Each alternative is a capture group naming a
//! family of candidates; validators in `scan.rs` decide what a candidate really is. One
//! pass of the `regex` crate's lazy DFA (no backtracking) keeps scanning linear in the
//! text, and every repetition that could run on is either bounded or ends at a character
//! class that cannot repeat forever inside one candidate.

use regex::Regex;

/// Capture group numbers of the families, in alternation (= priority) order.
pub const EMAIL: usize = 1;
pub const SECRET: usize = 2;
pub const PEM: usize = 3;
pub const IBAN: usize = 4;
pub const IPV6: usize = 5;
pub const IPV4: usize = 6;
pub const DIGITS: usize = 7;

/// Longest text a candidate can span apart from PEM blocks (which are followed separately):
/// streaming holds back at most this much.
pub const MAX_CANDIDATE_BYTES: usize = 320;

pub fn build() -> Regex {
    let email = r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){1,6}";
    let secret = [
        // AWS access key ids.
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}",
        // Bearer tokens in headers or prose.
        r"[Bb]earer[ \t]{1,4}[A-Za-z0-9\-._~+/]{16,256}=*",
        // OpenAI / Anthropic style keys, GitHub, Slack and Google API keys, JWTs.
        r"sk-[A-Za-z0-9_\-]{20,200}",
        r"gh[pousr]_[A-Za-z0-9]{36,40}",
        r"xox[abprs]-[A-Za-z0-9\-]{10,100}",
        r"AIza[0-9A-Za-z_\-]{35}",
        r"eyJ[A-Za-z0-9_\-]{8,200}\.[A-Za-z0-9_\-]{8,400}\.[A-Za-z0-9_\-]{8,200}",
        // `password = ...` and friends.
        r#"(?i:password|passwd|api[_-]?key|secret[_-]?key|access[_-]?token|client[_-]?secret)["']?[ \t]{0,4}[:=][ \t]{0,4}["']?[A-Za-z0-9_\-+/=!@#$%^&*.]{8,128}"#,
    ]
    .join("|");
    let pem = r"-----BEGIN [A-Z0-9 ]{0,24}PRIVATE KEY-----";
    let iban = r"[A-Z]{2}[0-9]{2}(?:[ ]?[A-Z0-9]){11,30}";
    let ipv6 = r"[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:]{2,38}";
    let ipv4 = r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}";
    let digits = r"\+?[0-9](?:[ \-]?[0-9]){6,30}[Xx]?";
    let pattern = format!("({email})|({secret})|({pem})|({iban})|({ipv6})|({ipv4})|({digits})");
    Regex::new(&pattern).expect("the PII pattern is valid")
}
