//! The KV-event batch as vLLM sends it and llm-d's KV indexer reads it: msgpack, array form.
//!
//! `[ts, [event, ...], dp_rank]`, each event an array led by its name:
//! `["BlockStored", hashes, parent|nil, token_ids, block_size, lora_id|nil, medium,
//! lora_name|nil, extra_keys]`, `["BlockRemoved", hashes, medium]`, `["AllBlocksCleared"]`.
//! Block hashes go out as unsigned 64-bit integers, the low half of Pagoda's 128-bit hashes
//! (vLLM's integer form, which every consumer reads); extra_keys has one entry per block:
//! `[salt]` for a salted request, nil otherwise.

use pagoda_runtime::{BlockHash, KvCacheEvent, KvEventBatch};
use rmp::encode;

/// The tier the blocks live in. vLLM names its own KV cache "GPU", and pickers score that
/// tier as the engine's working cache (others as offloaded copies); Pagoda's own cache is in
/// host memory but plays that role, so it is announced the same way.
pub const MEDIUM: &str = "GPU";

/// A block hash as announced: its low 64 bits.
pub fn wire_hash(hash: BlockHash) -> u64 {
    hash.0 as u64
}

/// Encodes one step's batch. Writing to a `Vec` cannot fail.
pub fn encode_batch(batch: &KvEventBatch, block_size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write_batch(&mut out, batch, block_size).expect("writing to a Vec does not fail");
    out
}

type WriteResult = Result<(), encode::ValueWriteError<std::io::Error>>;

fn write_batch(out: &mut Vec<u8>, batch: &KvEventBatch, block_size: usize) -> WriteResult {
    encode::write_array_len(out, 3)?;
    encode::write_f64(out, batch.timestamp)?;
    encode::write_array_len(out, len32(batch.events.len()))?;
    for event in &batch.events {
        write_event(out, event, block_size)?;
    }
    // Data-parallel rank: one engine per server.
    encode::write_uint(out, 0)?;
    Ok(())
}

fn write_event(out: &mut Vec<u8>, event: &KvCacheEvent, block_size: usize) -> WriteResult {
    match event {
        KvCacheEvent::BlockStored {
            hashes,
            parent,
            token_ids,
            cache_salt,
        } => {
            encode::write_array_len(out, 9)?;
            encode::write_str(out, "BlockStored")?;
            write_hashes(out, hashes)?;
            match parent {
                Some(parent) => encode::write_uint(out, wire_hash(*parent)).map(drop)?,
                None => write_nil(out)?,
            }
            encode::write_array_len(out, len32(token_ids.len()))?;
            for &token in token_ids {
                encode::write_uint(out, u64::from(token))?;
            }
            encode::write_uint(out, block_size as u64)?;
            write_nil(out)?; // lora_id
            encode::write_str(out, MEDIUM)?;
            write_nil(out)?; // lora_name
            encode::write_array_len(out, len32(hashes.len()))?;
            for _ in hashes {
                match cache_salt {
                    Some(salt) => {
                        encode::write_array_len(out, 1)?;
                        encode::write_str(out, salt.as_str())?;
                    }
                    None => write_nil(out)?,
                }
            }
        }
        KvCacheEvent::BlockRemoved { hashes } => {
            encode::write_array_len(out, 3)?;
            encode::write_str(out, "BlockRemoved")?;
            write_hashes(out, hashes)?;
            encode::write_str(out, MEDIUM)?;
        }
        KvCacheEvent::AllBlocksCleared => {
            encode::write_array_len(out, 1)?;
            encode::write_str(out, "AllBlocksCleared")?;
        }
    }
    Ok(())
}

fn write_nil(out: &mut Vec<u8>) -> WriteResult {
    encode::write_nil(out).map_err(encode::ValueWriteError::InvalidMarkerWrite)
}

fn write_hashes(out: &mut Vec<u8>, hashes: &[BlockHash]) -> WriteResult {
    encode::write_array_len(out, len32(hashes.len()))?;
    for &hash in hashes {
        encode::write_uint(out, wire_hash(hash))?;
    }
    Ok(())
}

/// msgpack lengths are 32-bit; one step never holds 4 billion blocks or tokens.
fn len32(n: usize) -> u32 {
    u32::try_from(n).expect("msgpack array lengths are 32-bit")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pagoda_runtime::CacheSalt;

    #[test]
    fn a_batch_encodes_as_vllm_array_form() {
        let batch = KvEventBatch {
            timestamp: 1.5,
            events: vec![
                KvCacheEvent::AllBlocksCleared,
                KvCacheEvent::BlockStored {
                    hashes: vec![BlockHash((7 << 64) | 300), BlockHash(2)],
                    parent: Some(BlockHash(1)),
                    token_ids: vec![1, 2, 3, 70000],
                    cache_salt: Some(CacheSalt::new("t")),
                },
                KvCacheEvent::BlockRemoved {
                    hashes: vec![BlockHash(2)],
                },
            ],
        };
        let bytes = encode_batch(&batch, 2);
        // Hand-assembled msgpack of the same batch.
        let mut expected = vec![0x93, 0xcb];
        expected.extend(1.5f64.to_be_bytes());
        expected.push(0x93);
        expected.extend([0x91, 0xb0]);
        expected.extend(b"AllBlocksCleared");
        expected.extend([0x99, 0xab]);
        expected.extend(b"BlockStored");
        expected.extend([0x92, 0xcd, 0x01, 0x2c, 0x02]); // [300, 2]: the low 64 bits
        expected.push(0x01); // parent
        expected.extend([0x94, 0x01, 0x02, 0x03, 0xce, 0x00, 0x01, 0x11, 0x70]);
        expected.push(0x02); // block size
        expected.push(0xc0); // lora_id
        expected.extend([0xa3, b'G', b'P', b'U']);
        expected.push(0xc0); // lora_name
        expected.extend([0x92, 0x91, 0xa1, b't', 0x91, 0xa1, b't']);
        expected.extend([0x93, 0xac]);
        expected.extend(b"BlockRemoved");
        expected.extend([0x91, 0x02, 0xa3, b'G', b'P', b'U']);
        expected.push(0x00); // dp rank
        assert_eq!(bytes, expected);
    }
}
