//! The bytes a record's hash covers: its JSON with keys sorted at every level and no
//! whitespace, so the hash does not depend on how a serializer orders fields.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::audit::key::{AuditKey, KEYED};

pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write(&map[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// SHA-256 (hex) of the record without its own `hash` field.
pub fn record_hash(record: &Value) -> String {
    let digest = Sha256::digest(body(record).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA256 (hex) of the same bytes, for a keyed chain.
pub fn record_mac(record: &Value, key: &AuditKey) -> String {
    key.mac(body(record).as_bytes())
}

/// The record as its hash covers it: canonical, without the `hash` field.
fn body(record: &Value) -> String {
    let mut body = record.clone();
    if let Value::Object(map) = &mut body {
        map.remove("hash");
    }
    canonical(&body)
}

/// The hash a record must carry: keyed records (`chain = "hmac-sha256"`) need the key.
pub fn expected_hash(record: &Value, key: Option<&AuditKey>) -> Result<String, &'static str> {
    match (record.get("chain").and_then(Value::as_str), key) {
        (None, None) => Ok(record_hash(record)),
        (Some(KEYED), Some(key)) => Ok(record_mac(record, key)),
        (Some(KEYED), None) => Err("a keyed record; verify it with the audit key"),
        (None, Some(_)) => Err("an unkeyed record in a keyed chain"),
        (Some(_), _) => Err("an unknown chain type"),
    }
}
