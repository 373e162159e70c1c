//! The kinds of personal data and secrets the scanner knows.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::GuardError;

/// An entity type. Its name (`EMAIL`, `CARD`, ...) is what policies, placeholders, errors and
/// audit records use; values themselves never leave the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EntityKind {
    Email,
    Phone,
    CnId,
    Card,
    Ip,
    Ssn,
    Iban,
    Secret,
}

impl EntityKind {
    pub const ALL: [EntityKind; 8] = [
        EntityKind::Email,
        EntityKind::Phone,
        EntityKind::CnId,
        EntityKind::Card,
        EntityKind::Ip,
        EntityKind::Ssn,
        EntityKind::Iban,
        EntityKind::Secret,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EntityKind::Email => "EMAIL",
            EntityKind::Phone => "PHONE",
            EntityKind::CnId => "CN_ID",
            EntityKind::Card => "CARD",
            EntityKind::Ip => "IP",
            EntityKind::Ssn => "SSN",
            EntityKind::Iban => "IBAN",
            EntityKind::Secret => "SECRET",
        }
    }
}

impl fmt::Display for EntityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EntityKind {
    type Err = GuardError;

    fn from_str(s: &str) -> Result<EntityKind, GuardError> {
        EntityKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| GuardError::UnknownEntity(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_str() {
        for kind in EntityKind::ALL {
            assert_eq!(kind.name().parse::<EntityKind>().unwrap(), kind);
        }
        assert!("PASSPORT".parse::<EntityKind>().is_err());
    }

    #[test]
    fn serde_uses_the_same_names() {
        let json = serde_json::to_string(&EntityKind::CnId).unwrap();
        assert_eq!(json, "\"CN_ID\"");
    }
}
