//! GGUF v3 bytes from metadata and tensors: what the tests use to make files with chosen
//! (often broken) metadata, shapes and types, or split sets, out of the committed fixtures.

use std::collections::BTreeMap;

use crate::file::{GgufFile, DEFAULT_ALIGNMENT};
use crate::split::{SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS_COUNT};
use crate::value::MetaValue;

/// One tensor to write: its ggml dims (`dims[0]` innermost), raw type id and stored bytes.
#[derive(Debug, Clone)]
pub struct TensorToWrite {
    pub name: String,
    pub dims: Vec<u64>,
    pub type_id: u32,
    pub bytes: Vec<u8>,
}

impl GgufFile {
    /// Every tensor as stored, to write again (changed or not); tensors of types of unknown
    /// size are left out.
    pub fn tensors_to_write(&self) -> Vec<TensorToWrite> {
        self.tensors()
            .filter_map(|t| {
                Some(TensorToWrite {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    type_id: t.tensor_type.id(),
                    bytes: self.tensor_bytes(t)?.to_vec(),
                })
            })
            .collect()
    }
}

/// The file, tensor data aligned to `general.alignment` (32 when absent or unusable).
pub fn gguf_bytes(metadata: &BTreeMap<String, MetaValue>, tensors: &[TensorToWrite]) -> Vec<u8> {
    let alignment = metadata
        .get("general.alignment")
        .and_then(MetaValue::as_u64)
        .filter(|a| a.is_power_of_two() && *a <= 1 << 16)
        .unwrap_or(DEFAULT_ALIGNMENT) as usize;
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((metadata.len() as u64).to_le_bytes());
    for (key, v) in metadata {
        string(&mut out, key);
        out.extend(type_id(v).to_le_bytes());
        value(&mut out, v);
    }
    let mut offset = 0usize;
    for t in tensors {
        string(&mut out, &t.name);
        out.extend((t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(t.type_id.to_le_bytes());
        out.extend((offset as u64).to_le_bytes());
        offset = (offset + t.bytes.len()).next_multiple_of(alignment);
    }
    for t in tensors {
        out.resize(out.len().next_multiple_of(alignment), 0);
        out.extend(&t.bytes);
    }
    out
}

/// A split set as gguf-split writes one: `shares[i]` tensors in shard `i` (in order; a share
/// may be 0), the metadata in the first shard, the `split.*` keys in all.
pub fn split_gguf_bytes(
    metadata: &BTreeMap<String, MetaValue>,
    tensors: &[TensorToWrite],
    shares: &[usize],
) -> Vec<Vec<u8>> {
    assert_eq!(
        shares.iter().sum::<usize>(),
        tensors.len(),
        "every tensor in a shard"
    );
    let mut rest = tensors;
    shares
        .iter()
        .enumerate()
        .map(|(no, &share)| {
            let mut keys = if no == 0 {
                metadata.clone()
            } else {
                BTreeMap::new()
            };
            keys.insert(SPLIT_NO.into(), MetaValue::U16(no as u16));
            keys.insert(SPLIT_COUNT.into(), MetaValue::U16(shares.len() as u16));
            keys.insert(
                SPLIT_TENSORS_COUNT.into(),
                MetaValue::I32(tensors.len() as i32),
            );
            let (these, later) = rest.split_at(share);
            rest = later;
            gguf_bytes(&keys, these)
        })
        .collect()
}

fn type_id(value: &MetaValue) -> u32 {
    match value {
        MetaValue::U8(_) => 0,
        MetaValue::I8(_) => 1,
        MetaValue::U16(_) => 2,
        MetaValue::I16(_) => 3,
        MetaValue::U32(_) => 4,
        MetaValue::I32(_) => 5,
        MetaValue::F32(_) => 6,
        MetaValue::Bool(_) => 7,
        MetaValue::String(_) => 8,
        MetaValue::Array(_) => 9,
        MetaValue::U64(_) => 10,
        MetaValue::I64(_) => 11,
        MetaValue::F64(_) => 12,
    }
}

fn string(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn value(out: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => out.extend(x.to_le_bytes()),
        MetaValue::I8(x) => out.extend(x.to_le_bytes()),
        MetaValue::U16(x) => out.extend(x.to_le_bytes()),
        MetaValue::I16(x) => out.extend(x.to_le_bytes()),
        MetaValue::U32(x) => out.extend(x.to_le_bytes()),
        MetaValue::I32(x) => out.extend(x.to_le_bytes()),
        MetaValue::U64(x) => out.extend(x.to_le_bytes()),
        MetaValue::I64(x) => out.extend(x.to_le_bytes()),
        MetaValue::F32(x) => out.extend(x.to_le_bytes()),
        MetaValue::F64(x) => out.extend(x.to_le_bytes()),
        MetaValue::Bool(x) => out.push(*x as u8),
        MetaValue::String(s) => string(out, s),
        MetaValue::Array(items) => {
            out.extend(items.first().map_or(8, type_id).to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for item in items {
                value(out, item);
            }
        }
    }
}
