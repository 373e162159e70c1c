//! The bytes a record's hash covers: its JSON with keys sorted at every level and no
//! whitespace, so the hash does not depend on how a serializer orders fields.

use serde_json::Value;
use sha2::{Digest, Sha256};

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
    let mut body = record.clone();
    if let Value::Object(map) = &mut body {
        map.remove("hash");
    }
    let digest = Sha256::digest(canonical(&body).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
