//! The API key format and its hash.
//!
//! A key is `pgd_<id>_<secret>`: `id` is 16 hex digits (public, used to find the row),
//! `secret` is 64 hex digits (256 random bits). Only SHA-256(id ":" secret) is stored. A slow
//! password hash (argon2, bcrypt) exists to protect low-entropy human passwords from offline
//! guessing; a 256-bit random secret cannot be guessed whatever the hash's speed, so one
//! SHA-256 is enough and costs about a microsecond per request. The comparison of hashes is
//! constant-time so response timing reveals nothing about how much of a hash matched.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::ids::{hex, random_hex, KeyId};

const PREFIX: &str = "pgd_";
const ID_HEX: usize = 16;
const SECRET_HEX: usize = 64;

/// A whole key as the client presents it. Deliberately not `Debug` or `Display`, so it cannot
/// be formatted into a log line by accident.
pub struct ApiKey(String);

impl ApiKey {
    /// A fresh key and its public id.
    pub fn generate() -> (KeyId, ApiKey) {
        let id = random_hex(ID_HEX / 2);
        let secret = random_hex(SECRET_HEX / 2);
        let key = ApiKey(format!("{PREFIX}{id}_{secret}"));
        (KeyId::new(id), key)
    }

    /// The text to hand the user, once.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

/// Splits a presented key into its id and secret; `None` for anything malformed.
pub fn parse(presented: &str) -> Option<(KeyId, &str)> {
    let rest = presented.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let well_formed = id.len() == ID_HEX
        && secret.len() == SECRET_HEX
        && id
            .bytes()
            .chain(secret.bytes())
            .all(|b| b.is_ascii_hexdigit());
    well_formed.then(|| (KeyId::new(id), secret))
}

/// The stored form: hex SHA-256 over the id and the secret (the id is included so a hash
/// copied to another row does not authenticate there).
pub fn hash(id: &KeyId, secret: &str) -> String {
    let mut h = Sha256::new();
    h.update(id.as_str().as_bytes());
    h.update(b":");
    h.update(secret.as_bytes());
    hex(&h.finalize())
}

pub fn hashes_equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_back_and_differ() {
        let (id, key) = ApiKey::generate();
        let (parsed, secret) = parse(key.reveal()).unwrap();
        assert_eq!(parsed, id);
        assert_eq!(secret.len(), SECRET_HEX);
        let (_, other) = ApiKey::generate();
        assert_ne!(key.reveal(), other.reveal());
    }

    #[test]
    fn malformed_keys_are_refused() {
        for bad in [
            "",
            "pgd_",
            "sk-123",
            "pgd_abc_def",
            &format!("pgd_{}_{}", "g".repeat(16), "0".repeat(64)),
        ] {
            assert!(parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn the_hash_binds_the_id() {
        let a = hash(&KeyId::new("0011223344556677"), "ab");
        let b = hash(&KeyId::new("0011223344556678"), "ab");
        assert_ne!(a, b);
        assert!(hashes_equal(&a, &a.clone()));
        assert!(!hashes_equal(&a, &b));
    }
}
