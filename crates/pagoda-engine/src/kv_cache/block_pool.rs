//! The pool of KV blocks: reference counts, the LRU free queue and the prefix index.
//!
//! A block is either referenced (`ref_count > 0`, in some request's block table) or in the free
//! queue, never both. A free block keeps its hash and stays findable in the prefix index until it
//! is popped for reuse, so a later request with the same prefix can revive it.

use super::block_hash::BlockKey;
use super::events::{KvCacheEvent, KvEventLog};
use super::free_queue::FreeQueue;
use super::prefix_index::PrefixIndex;
use crate::ids::{BlockHash, BlockId};

#[derive(Clone, Copy, Debug, Default)]
struct BlockMeta {
    ref_count: u32,
    /// Set while the block is registered in the prefix index.
    hash: Option<BlockHash>,
}

#[derive(Clone, Debug)]
pub struct BlockPool {
    blocks: Vec<BlockMeta>,
    free: FreeQueue,
    index: PrefixIndex,
    /// Kept only when something reads the events (`enable_events`).
    events: Option<KvEventLog>,
}

impl BlockPool {
    pub fn new(num_blocks: usize) -> Self {
        Self {
            blocks: vec![BlockMeta::default(); num_blocks],
            free: FreeQueue::full(num_blocks),
            index: PrefixIndex::default(),
            events: None,
        }
    }

    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Free blocks, including those still holding a cached prefix.
    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    pub fn ref_count(&self, block: BlockId) -> u32 {
        self.blocks[block.index()].ref_count
    }

    pub fn is_free(&self, block: BlockId) -> bool {
        self.free.contains(block)
    }

    /// The hash `block` is registered under in the prefix index, if any.
    pub fn cached_hash(&self, block: BlockId) -> Option<BlockHash> {
        self.blocks[block.index()].hash
    }

    /// Free blocks from the next to be reused to the last.
    pub fn free_order(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.free.iter()
    }

    pub fn num_cached_blocks(&self) -> usize {
        self.index.len()
    }

    /// Every hash in the prefix index, in no particular order.
    pub fn cached_hashes(&self) -> impl Iterator<Item = BlockHash> + '_ {
        self.index.hashes()
    }

    /// Starts logging registrations and evictions; `root` is the parent hash of first blocks.
    pub fn enable_events(&mut self, root: BlockHash) {
        self.events.get_or_insert_with(|| KvEventLog::new(root));
    }

    /// The events since the last call (none unless enabled).
    pub fn take_events(&mut self) -> Vec<KvCacheEvent> {
        self.events
            .as_mut()
            .map(KvEventLog::take)
            .unwrap_or_default()
    }

    /// The block that holds exactly `key`'s prefix, free or in use.
    pub fn lookup(&self, hash: BlockHash, key: &BlockKey<'_>) -> Option<BlockId> {
        self.index.lookup(hash, key)
    }

    /// Takes `n` blocks from the front of the free queue (evicting their cached prefixes), each
    /// with one reference. Returns `None`, changing nothing, if fewer than `n` are free.
    pub fn allocate(&mut self, n: usize) -> Option<Vec<BlockId>> {
        if n > self.free.len() {
            return None;
        }
        let blocks = (0..n)
            .map(|_| {
                let block = self.free.pop_front().expect("checked above");
                let meta = &mut self.blocks[block.index()];
                if let Some(hash) = meta.hash.take() {
                    self.index.remove(hash, block);
                    if let Some(log) = &mut self.events {
                        log.removed(hash);
                    }
                }
                meta.ref_count = 1;
                block
            })
            .collect();
        Some(blocks)
    }

    /// Adds a reference to each block (a prefix-cache hit or a fork), reviving free ones.
    pub fn touch(&mut self, blocks: &[BlockId]) {
        for &block in blocks {
            if self.blocks[block.index()].ref_count == 0 {
                self.free.remove(block);
            }
            self.blocks[block.index()].ref_count += 1;
        }
    }

    /// Drops one reference from each block, in the given order; blocks left unreferenced join
    /// the back of the free queue in that order.
    pub fn release(&mut self, blocks: impl IntoIterator<Item = BlockId>) {
        for block in blocks {
            let meta = &mut self.blocks[block.index()];
            assert!(meta.ref_count > 0, "{block} released with no references");
            meta.ref_count -= 1;
            if meta.ref_count == 0 {
                self.free.push_back(block);
            }
        }
    }

    /// Registers a full, computed block under its hash. A block already registered, or a hash
    /// already held by another block, is left as it is.
    pub fn cache(&mut self, block: BlockId, hash: BlockHash, key: &BlockKey<'_>) {
        let meta = &mut self.blocks[block.index()];
        if meta.hash.is_some() {
            return;
        }
        if self.index.insert(hash, block, key) {
            meta.hash = Some(hash);
            if let Some(log) = &mut self.events {
                log.stored(hash, key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::block_hash::{BlockHasher, ExtraKeys};

    fn ids(blocks: impl IntoIterator<Item = BlockId>) -> Vec<u32> {
        blocks.into_iter().map(|b| b.0).collect()
    }

    #[test]
    fn allocation_takes_the_front_of_the_free_queue() {
        let mut pool = BlockPool::new(4);
        assert_eq!(ids(pool.allocate(2).unwrap()), [0, 1]);
        assert_eq!(pool.num_free(), 2);
        assert_eq!(pool.ref_count(BlockId(0)), 1);
        assert_eq!(ids(pool.free_order()), [2, 3]);
    }

    #[test]
    fn allocating_more_than_is_free_changes_nothing() {
        let mut pool = BlockPool::new(2);
        assert!(pool.allocate(3).is_none());
        assert_eq!(pool.num_free(), 2);
        assert_eq!(ids(pool.free_order()), [0, 1]);
    }

    #[test]
    fn released_blocks_join_the_back_in_release_order() {
        let mut pool = BlockPool::new(4);
        let blocks = pool.allocate(3).unwrap();
        pool.release(blocks.iter().rev().copied());
        assert_eq!(ids(pool.free_order()), [3, 2, 1, 0]);
    }

    #[test]
    fn a_shared_block_is_freed_by_its_last_reference() {
        let mut pool = BlockPool::new(2);
        let blocks = pool.allocate(1).unwrap();
        pool.touch(&blocks);
        assert_eq!(pool.ref_count(blocks[0]), 2);
        pool.release(blocks.clone());
        assert!(!pool.is_free(blocks[0]));
        pool.release(blocks.clone());
        assert!(pool.is_free(blocks[0]));
    }

    #[test]
    fn a_free_cached_block_is_revived_from_the_middle_of_the_queue() {
        let hasher = BlockHasher::default();
        let mut pool = BlockPool::new(3);
        let blocks = pool.allocate(3).unwrap();
        let key = BlockKey {
            parent: hasher.root(),
            tokens: &[7, 7],
            extra: ExtraKeys::default(),
        };
        let hash = hasher.hash(&key);
        pool.cache(blocks[1], hash, &key);
        pool.release(blocks.clone());
        assert_eq!(ids(pool.free_order()), [0, 1, 2]);
        let hit = pool.lookup(hash, &key).unwrap();
        assert_eq!(hit, BlockId(1));
        pool.touch(&[hit]);
        assert_eq!(ids(pool.free_order()), [0, 2]);
        assert_eq!(pool.ref_count(hit), 1);
    }

    #[test]
    fn reusing_a_cached_block_evicts_its_prefix() {
        let hasher = BlockHasher::default();
        let mut pool = BlockPool::new(1);
        let blocks = pool.allocate(1).unwrap();
        let key = BlockKey {
            parent: hasher.root(),
            tokens: &[1],
            extra: ExtraKeys::default(),
        };
        let hash = hasher.hash(&key);
        pool.cache(blocks[0], hash, &key);
        pool.release(blocks);
        assert_eq!(
            pool.lookup(hash, &key),
            Some(BlockId(0)),
            "free but still cached"
        );
        let again = pool.allocate(1).unwrap();
        assert_eq!(again, [BlockId(0)]);
        assert_eq!(pool.lookup(hash, &key), None);
        assert_eq!(pool.cached_hash(BlockId(0)), None);
        assert_eq!(pool.num_cached_blocks(), 0);
    }
}
