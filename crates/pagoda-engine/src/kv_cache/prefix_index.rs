//! The prefix index: block hash -> the block that holds that prefix's KV.
//!
//! Each entry keeps the block's full hash input (parent hash, token ids, salt), and a lookup
//! only hits when the caller's key matches it exactly: the 128-bit hash finds the block, the
//! stored key confirms it.

use super::block_hash::BlockKey;
use crate::ids::{BlockHash, BlockId, CacheSalt, TokenId};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The owned form of a `BlockKey`, kept for confirmation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct StoredKey {
    parent: BlockHash,
    tokens: Box<[TokenId]>,
    /// The request's own salt, shared rather than copied per block.
    cache_salt: Option<CacheSalt>,
}

impl StoredKey {
    fn new(key: &BlockKey<'_>) -> Self {
        Self {
            parent: key.parent,
            tokens: key.tokens.into(),
            cache_salt: key.extra.cache_salt.cloned(),
        }
    }

    fn matches(&self, key: &BlockKey<'_>) -> bool {
        self.parent == key.parent
            && *self.tokens == *key.tokens
            && self.cache_salt.as_ref() == key.extra.cache_salt
    }
}

#[derive(Clone, Debug)]
struct Entry {
    block: BlockId,
    key: StoredKey,
}

/// Block hashes are already uniform, so the map uses their low 64 bits instead of rehashing.
#[derive(Default)]
struct BlockHashHasher(u64);

impl Hasher for BlockHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, value: u128) {
        self.0 = value as u64;
    }
}

#[derive(Clone, Debug, Default)]
pub struct PrefixIndex {
    entries: HashMap<BlockHash, Entry, BuildHasherDefault<BlockHashHasher>>,
}

impl PrefixIndex {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The block holding exactly `key`'s prefix, if any.
    pub fn lookup(&self, hash: BlockHash, key: &BlockKey<'_>) -> Option<BlockId> {
        let entry = self.entries.get(&hash)?;
        entry.key.matches(key).then_some(entry.block)
    }

    pub fn hashes(&self) -> impl Iterator<Item = BlockHash> + '_ {
        self.entries.keys().copied()
    }

    /// The block registered under `hash`, unconfirmed (for tests and invariant checks).
    pub fn block_for(&self, hash: BlockHash) -> Option<BlockId> {
        self.entries.get(&hash).map(|e| e.block)
    }

    /// Registers `block` under `hash`. Returns false (and changes nothing) when another block
    /// already holds this hash: two requests computed the same prefix at the same time, and the
    /// first one registered stays the shared copy.
    pub fn insert(&mut self, hash: BlockHash, block: BlockId, key: &BlockKey<'_>) -> bool {
        if self.entries.contains_key(&hash) {
            return false;
        }
        let key = StoredKey::new(key);
        self.entries.insert(hash, Entry { block, key });
        true
    }

    /// Forgets `hash` if it maps to `block`.
    pub fn remove(&mut self, hash: BlockHash, block: BlockId) {
        if self.entries.get(&hash).is_some_and(|e| e.block == block) {
            self.entries.remove(&hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::block_hash::{BlockHasher, ExtraKeys};

    fn key<'a>(
        parent: BlockHash,
        tokens: &'a [TokenId],
        salt: Option<&'a CacheSalt>,
    ) -> BlockKey<'a> {
        BlockKey {
            parent,
            tokens,
            extra: ExtraKeys { cache_salt: salt },
        }
    }

    #[test]
    fn a_hit_is_confirmed_against_the_stored_tokens_and_salt() {
        let root = BlockHasher::default().root();
        let mut index = PrefixIndex::default();
        let hash = BlockHash(42);
        let (a, b) = (CacheSalt::new("a"), CacheSalt::new("b"));
        assert!(index.insert(hash, BlockId(3), &key(root, &[1, 2], Some(&a))));
        assert_eq!(
            index.lookup(hash, &key(root, &[1, 2], Some(&CacheSalt::new("a")))),
            Some(BlockId(3)),
            "salts compare by value"
        );
        // A colliding hash with other tokens, salt or parent is a miss.
        assert_eq!(index.lookup(hash, &key(root, &[1, 3], Some(&a))), None);
        assert_eq!(index.lookup(hash, &key(root, &[1, 2], Some(&b))), None);
        assert_eq!(index.lookup(hash, &key(root, &[1, 2], None)), None);
        assert_eq!(
            index.lookup(hash, &key(BlockHash(7), &[1, 2], Some(&a))),
            None
        );
    }

    #[test]
    fn the_first_registered_block_keeps_the_hash() {
        let root = BlockHasher::default().root();
        let mut index = PrefixIndex::default();
        assert!(index.insert(BlockHash(1), BlockId(0), &key(root, &[1], None)));
        assert!(!index.insert(BlockHash(1), BlockId(5), &key(root, &[1], None)));
        assert_eq!(index.block_for(BlockHash(1)), Some(BlockId(0)));
        index.remove(BlockHash(1), BlockId(5));
        assert_eq!(
            index.len(),
            1,
            "removing under another block's id is a no-op"
        );
        index.remove(BlockHash(1), BlockId(0));
        assert!(index.is_empty());
    }
}
