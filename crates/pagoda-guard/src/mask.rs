//! Masked renderings: enough left to recognise one's own data, not enough to use it.

use crate::entity::EntityKind;

pub fn mask(kind: EntityKind, value: &str) -> String {
    match kind {
        EntityKind::Email => match value.rsplit_once('@') {
            Some((local, domain)) => {
                let first = local.chars().next().unwrap_or('*');
                format!("{first}***@{domain}")
            }
            None => "***".into(),
        },
        EntityKind::Card | EntityKind::Phone | EntityKind::CnId | EntityKind::Ssn => {
            keep_last_alnum(value, 4)
        }
        EntityKind::Iban => {
            let masked = keep_last_alnum(value, 4);
            format!("{}{}", &value[..2], &masked[2..])
        }
        EntityKind::Ip => match value.split_once(['.', ':']) {
            Some((first, _)) if value.contains('.') => format!("{first}.*.*.*"),
            Some((first, _)) => format!("{first}:*:*"),
            None => "*".into(),
        },
        EntityKind::Secret => {
            let head: String = value.chars().take(4).collect();
            format!("{head}****")
        }
    }
}

/// Every letter and digit but the last `keep` become `*`; separators stay.
fn keep_last_alnum(value: &str, keep: usize) -> String {
    let total = value.chars().filter(char::is_ascii_alphanumeric).count();
    let mut seen = 0;
    value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                seen += 1;
                if seen + keep <= total {
                    return '*';
                }
            }
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keep_a_hint() {
        assert_eq!(
            mask(EntityKind::Email, "jane@example.com"),
            "j***@example.com"
        );
        assert_eq!(
            mask(EntityKind::Card, "4111 1111 1111 1111"),
            "**** **** **** 1111"
        );
        assert_eq!(mask(EntityKind::Ssn, "123-45-6789"), "***-**-6789");
        assert_eq!(
            mask(EntityKind::Iban, "GB82WEST12345698765432"),
            "GB****************5432"
        );
        assert_eq!(mask(EntityKind::Ip, "10.1.2.3"), "10.*.*.*");
        assert_eq!(mask(EntityKind::Secret, "AKIAIOSFODNN7EXAMPLE"), "AKIA****");
    }
}
