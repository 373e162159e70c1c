//! What happens to an entity once found.

use serde::{Deserialize, Serialize};

/// Per entity type, chosen by the tenant's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Leave the value as it is.
    Allow,
    /// Replace with a typed, numbered placeholder (`[EMAIL_1]`), restorable in responses.
    Redact,
    /// Keep a hint (`j***@example.com`, `**** **** **** 1111`), hide the rest.
    Mask,
    /// Refuse the request (in responses, where refusing is too late, redact instead).
    Block,
}
