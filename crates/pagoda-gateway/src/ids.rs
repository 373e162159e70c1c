//! Typed identifiers, so a tenant name can never be passed where a key id is expected.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(value: impl Into<String>) -> Self {
                $name(value.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_id!(
    /// A team: the unit that policies, limits and budgets apply to.
    TenantId
);
string_id!(
    /// The public part of an API key; safe to log and show.
    KeyId
);
string_id!(
    /// One cost event; sinks deduplicate on it, so a replay never counts twice.
    EventId
);
string_id!(
    /// One HTTP request as the gateway saw it.
    RequestId
);

/// `bytes` random bytes as lower-case hex.
pub fn random_hex(bytes: usize) -> String {
    use rand::RngCore;
    let mut buf = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buf);
    hex(&buf)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

impl EventId {
    /// 128 random bits: unique without coordination between replicas.
    pub fn random() -> EventId {
        EventId(random_hex(16))
    }
}

impl RequestId {
    pub fn random() -> RequestId {
        RequestId(format!("req-{}", random_hex(12)))
    }
}
