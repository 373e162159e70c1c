//! What changed in the prefix index, for routers that keep a copy of it (prefix-aware pickers
//! read these as vLLM's KV events).
//!
//! The log is written by the block pool as it registers and evicts blocks, and drained by the
//! engine loop once per step. Consecutive blocks of one sequence registered in one go become one
//! `BlockStored` (its parent is the block before the first), and evictions in a row one
//! `BlockRemoved`, so a step with a long prefill sends a few events, not one per block.

use super::block_hash::BlockKey;
use crate::ids::{BlockHash, CacheSalt, TokenId};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvCacheEvent {
    /// Blocks that requests may now hit, in sequence order: each block's parent is the one
    /// before it, the first one's is `parent` (`None`: the start of a sequence).
    BlockStored {
        hashes: Vec<BlockHash>,
        parent: Option<BlockHash>,
        /// `block_size` tokens per block, blocks in order.
        token_ids: Vec<TokenId>,
        cache_salt: Option<CacheSalt>,
    },
    /// Blocks no request can hit any more.
    BlockRemoved { hashes: Vec<BlockHash> },
    /// Everything announced before is gone (sent first, so a router drops what it knew of
    /// an earlier run of this engine).
    AllBlocksCleared,
}

/// Events since the last `take`, merged as they come.
#[derive(Clone, Debug)]
pub struct KvEventLog {
    /// The parent of every sequence's first block: announced as no parent.
    root: BlockHash,
    events: Vec<KvCacheEvent>,
}

impl KvEventLog {
    /// A log whose first event clears whatever a router knew of this engine.
    pub fn new(root: BlockHash) -> Self {
        Self {
            root,
            events: vec![KvCacheEvent::AllBlocksCleared],
        }
    }

    pub(crate) fn stored(&mut self, hash: BlockHash, key: &BlockKey<'_>) {
        if let Some(KvCacheEvent::BlockStored {
            hashes,
            token_ids,
            cache_salt,
            ..
        }) = self.events.last_mut()
        {
            if hashes.last() == Some(&key.parent) && cache_salt.as_ref() == key.extra.cache_salt {
                hashes.push(hash);
                token_ids.extend_from_slice(key.tokens);
                return;
            }
        }
        self.events.push(KvCacheEvent::BlockStored {
            hashes: vec![hash],
            parent: (key.parent != self.root).then_some(key.parent),
            token_ids: key.tokens.to_vec(),
            cache_salt: key.extra.cache_salt.cloned(),
        });
    }

    pub(crate) fn removed(&mut self, hash: BlockHash) {
        if let Some(KvCacheEvent::BlockRemoved { hashes }) = self.events.last_mut() {
            hashes.push(hash);
            return;
        }
        self.events
            .push(KvCacheEvent::BlockRemoved { hashes: vec![hash] });
    }

    /// The events since the last call, oldest first.
    pub fn take(&mut self) -> Vec<KvCacheEvent> {
        std::mem::take(&mut self.events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::block_hash::{BlockHasher, ExtraKeys};

    #[test]
    fn a_chain_of_blocks_is_one_event_and_a_new_chain_starts_another() {
        let hasher = BlockHasher::default();
        let mut log = KvEventLog::new(hasher.root());
        assert_eq!(log.take(), [KvCacheEvent::AllBlocksCleared]);
        let salt = CacheSalt::new("t");
        let extra = ExtraKeys {
            cache_salt: Some(&salt),
        };
        let hashes = hasher.hash_blocks(&[1, 2, 3, 4, 5, 6], 2, extra);
        for (i, &hash) in hashes.iter().enumerate() {
            let parent = if i == 0 { hasher.root() } else { hashes[i - 1] };
            let tokens = [2 * i as u32 + 1, 2 * i as u32 + 2];
            let key = BlockKey {
                parent,
                tokens: &tokens,
                extra,
            };
            log.stored(hash, &key);
        }
        // Same parent, other salt: a new event.
        let key = BlockKey {
            parent: hashes[2],
            tokens: &[7, 8],
            extra: ExtraKeys::default(),
        };
        log.stored(BlockHash(99), &key);
        log.removed(hashes[0]);
        log.removed(hashes[1]);
        assert_eq!(
            log.take(),
            [
                KvCacheEvent::BlockStored {
                    hashes: hashes.clone(),
                    parent: None,
                    token_ids: vec![1, 2, 3, 4, 5, 6],
                    cache_salt: Some(salt),
                },
                KvCacheEvent::BlockStored {
                    hashes: vec![BlockHash(99)],
                    parent: Some(hashes[2]),
                    token_ids: vec![7, 8],
                    cache_salt: None,
                },
                KvCacheEvent::BlockRemoved {
                    hashes: hashes[..2].to_vec()
                },
            ]
        );
        assert!(log.take().is_empty());
    }
}
