//! A replica's cached blocks, rebuilt from its KV events (vLLM's msgpack array form).

use std::collections::HashSet;

use rmpv::Value;

/// Applies one batch `[ts, [event, ...], dp_rank]`; malformed events are skipped.
pub fn apply(blocks: &mut HashSet<u64>, payload: &[u8]) {
    let Ok(Value::Array(batch)) = rmpv::decode::read_value(&mut &payload[..]) else {
        return;
    };
    let Some(Value::Array(events)) = batch.get(1) else {
        return;
    };
    for event in events {
        let Value::Array(fields) = event else {
            continue;
        };
        let hashes = || {
            fields
                .get(1)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_u64)
        };
        match fields.first().and_then(Value::as_str) {
            Some("BlockStored") => blocks.extend(hashes()),
            Some("BlockRemoved") => {
                for hash in hashes() {
                    blocks.remove(&hash);
                }
            }
            Some("AllBlocksCleared") => blocks.clear(),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(value: Value) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, &value).unwrap();
        out
    }

    #[test]
    fn stored_removed_and_cleared_events_update_the_set() {
        let batch = |events: Vec<Value>| {
            encode(Value::Array(vec![
                Value::F64(1.0),
                Value::Array(events),
                Value::from(0),
            ]))
        };
        let stored = Value::Array(vec![
            "BlockStored".into(),
            Value::Array(vec![Value::from(1u64), Value::from(u64::MAX)]),
            Value::Nil,
        ]);
        let removed = Value::Array(vec![
            "BlockRemoved".into(),
            Value::Array(vec![Value::from(1u64)]),
            "GPU".into(),
        ]);
        let mut blocks = HashSet::new();
        apply(&mut blocks, &batch(vec![stored.clone(), removed]));
        assert_eq!(blocks, HashSet::from([u64::MAX]));
        apply(
            &mut blocks,
            &batch(vec![Value::Array(vec!["AllBlocksCleared".into()])]),
        );
        assert!(blocks.is_empty());
        apply(&mut blocks, b"\xc1 not msgpack");
        assert!(blocks.is_empty());
    }
}
