//! The key of a keyed chain: with it every record's hash is an HMAC-SHA256, so only a holder
//! of the key can write records that verify (an unkeyed chain can be rewritten whole by
//! anyone who can write the file).

use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::GuardError;

/// What a keyed record says in its `chain` field.
pub const KEYED: &str = "hmac-sha256";

/// At least this many bytes of key material.
const MIN_KEY_BYTES: usize = 32;

#[derive(Clone)]
pub struct AuditKey(Vec<u8>);

impl std::fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuditKey(..)")
    }
}

impl AuditKey {
    /// Reads a key file: its bytes, trailing white space trimmed (`openssl rand -hex 32 >
    /// FILE` makes one).
    pub fn load(path: &Path) -> Result<AuditKey, GuardError> {
        let bytes = std::fs::read(path).map_err(|e| GuardError::Audit {
            path: path.to_path_buf(),
            reason: format!("cannot read the audit key: {e}"),
        })?;
        AuditKey::new(bytes.trim_ascii_end()).map_err(|reason| GuardError::Audit {
            path: path.to_path_buf(),
            reason,
        })
    }

    pub fn new(bytes: &[u8]) -> Result<AuditKey, String> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(format!(
                "the audit key must have at least {MIN_KEY_BYTES} bytes, this one has {}",
                bytes.len()
            ));
        }
        Ok(AuditKey(bytes.to_vec()))
    }

    /// HMAC-SHA256 of `message`, hex.
    pub fn mac(&self, message: &[u8]) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(message);
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
