//! `KvCacheManager`: block tables per request on top of the block pool, with automatic prefix
//! caching.
//!
//! Every method that can fail is "ask, then act": it checks first and returns `None` without
//! touching any state when there are not enough free blocks.

use super::block_hash::{BlockHasher, BlockKey};
use super::block_pool::BlockPool;
use crate::ids::{BlockId, RequestId};
use crate::request::Request;
use std::collections::HashMap;

/// Blocks found in the prefix cache for a request about to be admitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CachedPrefix {
    pub blocks: Vec<BlockId>,
    /// `blocks.len() * block_size`; always less than the request's token count.
    pub num_tokens: usize,
}

/// Prefix-cache effectiveness, counted at each successful admission.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixCacheStats {
    /// Admissions that looked up the cache.
    pub queries: u64,
    /// Tokens those admissions asked for.
    pub queried_tokens: u64,
    /// Tokens served from the cache.
    pub hit_tokens: u64,
}

impl PrefixCacheStats {
    /// Fraction of queried tokens served from the cache (0 before any query).
    pub fn hit_rate(&self) -> f64 {
        if self.queried_tokens == 0 {
            0.0
        } else {
            self.hit_tokens as f64 / self.queried_tokens as f64
        }
    }
}

#[derive(Clone, Debug, Default)]
struct RequestBlocks {
    blocks: Vec<BlockId>,
    /// Leading blocks already offered to the prefix index.
    num_hashed: usize,
}

#[derive(Clone, Debug)]
pub struct KvCacheManager {
    block_size: usize,
    enable_prefix_caching: bool,
    hasher: BlockHasher,
    pool: BlockPool,
    tables: HashMap<RequestId, RequestBlocks>,
    stats: PrefixCacheStats,
}

impl KvCacheManager {
    /// # Panics
    /// If `block_size` is zero.
    pub fn new(
        num_blocks: usize,
        block_size: usize,
        enable_prefix_caching: bool,
        hasher: BlockHasher,
    ) -> Self {
        assert!(block_size > 0, "block_size must be positive");
        Self {
            block_size,
            enable_prefix_caching,
            hasher,
            pool: BlockPool::new(num_blocks),
            tables: HashMap::new(),
            stats: PrefixCacheStats::default(),
        }
    }

    pub fn block_size(&self) -> usize {
        self.block_size
    }

    pub fn num_blocks(&self) -> usize {
        self.pool.num_blocks()
    }

    pub fn num_free_blocks(&self) -> usize {
        self.pool.num_free()
    }

    /// Fraction of blocks referenced by some request (free cached blocks count as free).
    pub fn usage(&self) -> f64 {
        let total = self.pool.num_blocks();
        if total == 0 {
            return 0.0;
        }
        (total - self.pool.num_free()) as f64 / total as f64
    }

    pub fn prefix_cache_stats(&self) -> PrefixCacheStats {
        self.stats
    }

    pub fn pool(&self) -> &BlockPool {
        &self.pool
    }

    /// Logs prefix-index changes from now on, for `take_events`.
    pub fn enable_events(&mut self) {
        self.pool.enable_events(self.hasher.root());
    }

    /// Prefix-index changes since the last call; the first call after `enable_events` starts
    /// with `AllBlocksCleared`.
    pub fn take_events(&mut self) -> Vec<super::KvCacheEvent> {
        self.pool.take_events()
    }

    /// The request's block table, empty if it holds no blocks.
    pub fn block_table(&self, id: RequestId) -> &[BlockId] {
        self.tables.get(&id).map_or(&[], |t| &t.blocks)
    }

    /// Requests holding a block table.
    pub fn request_ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.tables.keys().copied()
    }

    /// The longest cached prefix of the request's tokens, in whole blocks. Never the whole
    /// sequence: at least one token is left to compute so the step produces logits. Has no
    /// side effects; the blocks are claimed by `allocate_slots`.
    pub fn find_cached_prefix(&self, request: &Request) -> CachedPrefix {
        if !self.enable_prefix_caching {
            return CachedPrefix::default();
        }
        let tokens = request.all_token_ids();
        let max_blocks = tokens.len().saturating_sub(1) / self.block_size;
        let hashes = request.block_hashes();
        let mut blocks = Vec::new();
        let mut parent = self.hasher.root();
        for (i, &hash) in hashes.iter().enumerate().take(max_blocks) {
            let key = BlockKey {
                parent,
                tokens: &tokens[i * self.block_size..(i + 1) * self.block_size],
                extra: request.extra_keys(),
            };
            match self.pool.lookup(hash, &key) {
                Some(block) => blocks.push(block),
                None => break,
            }
            parent = hash;
        }
        let num_tokens = blocks.len() * self.block_size;
        CachedPrefix { blocks, num_tokens }
    }

    /// Grows the request's block table so that `num_new_tokens` more tokens fit after its
    /// computed ones. At admission, `cached` is the prefix from `find_cached_prefix` (claimed
    /// here, counted as computed); afterwards it is empty.
    ///
    /// Returns the whole block table, or `None`, changing nothing, if too few blocks are free.
    pub fn allocate_slots(
        &mut self,
        request: &Request,
        num_new_tokens: usize,
        cached: &CachedPrefix,
    ) -> Option<&[BlockId]> {
        let held = self.tables.get(&request.id).map_or(0, |t| t.blocks.len());
        debug_assert!(
            cached.blocks.is_empty() || held == 0,
            "a cached prefix is only claimed at admission"
        );
        let num_tokens = request.num_computed_tokens + cached.num_tokens + num_new_tokens;
        let needed = num_tokens.div_ceil(self.block_size);
        let num_new_blocks = needed.saturating_sub(held + cached.blocks.len());
        // Reviving a free cached block takes it out of the free queue too.
        let revived = cached
            .blocks
            .iter()
            .filter(|&&b| self.pool.ref_count(b) == 0)
            .count();
        if num_new_blocks + revived > self.pool.num_free() {
            return None;
        }

        if held == 0 && self.enable_prefix_caching {
            self.stats.queries += 1;
            self.stats.queried_tokens += request.num_tokens() as u64;
            self.stats.hit_tokens += cached.num_tokens as u64;
        }
        self.pool.touch(&cached.blocks);
        let fresh = self.pool.allocate(num_new_blocks).expect("checked above");
        let table = self.tables.entry(request.id).or_default();
        if table.blocks.is_empty() {
            table.num_hashed = cached.blocks.len();
        }
        table.blocks.extend_from_slice(&cached.blocks);
        table.blocks.extend(fresh);
        Some(&table.blocks)
    }

    /// Registers in the prefix index every block of the request that is full of computed
    /// tokens (`num_computed_tokens` of them) and not registered yet.
    pub fn cache_full_blocks(&mut self, request: &Request, num_computed_tokens: usize) {
        if !self.enable_prefix_caching {
            return;
        }
        let Some(table) = self.tables.get_mut(&request.id) else {
            return;
        };
        let hashes = request.block_hashes();
        let tokens = request.all_token_ids();
        let full = (num_computed_tokens / self.block_size)
            .min(hashes.len())
            .min(table.blocks.len());
        for i in table.num_hashed..full {
            let parent = if i == 0 {
                self.hasher.root()
            } else {
                hashes[i - 1]
            };
            let key = BlockKey {
                parent,
                tokens: &tokens[i * self.block_size..(i + 1) * self.block_size],
                extra: request.extra_keys(),
            };
            self.pool.cache(table.blocks[i], hashes[i], &key);
        }
        table.num_hashed = table.num_hashed.max(full);
    }

    /// Gives the request's blocks back, last block first, so that its tail (the part least
    /// likely to be shared) is evicted before its prefix.
    pub fn free(&mut self, id: RequestId) {
        if let Some(table) = self.tables.remove(&id) {
            self.pool.release(table.blocks.into_iter().rev());
        }
    }

    /// Starts `child`'s block table by sharing the parent's full prompt blocks whose KV is
    /// computed (`n > 1`). The parent's partially filled last block is not shared: the child
    /// recomputes those tokens into a block of its own, which is simpler than copy-on-write and
    /// costs at most one block of prefill. At least one prompt token is always left to compute so
    /// the child gets its own logits. Returns the number of shared tokens, which become the
    /// child's computed tokens.
    pub fn fork(&mut self, parent: &Request, child: RequestId) -> usize {
        assert!(
            !self.tables.contains_key(&child),
            "{child} already has blocks"
        );
        let computed = parent.num_computed_tokens.min(parent.num_prompt_tokens());
        let max_shared = parent.num_prompt_tokens().saturating_sub(1);
        let num_blocks = computed.min(max_shared) / self.block_size;
        let parent_table = self.block_table(parent.id);
        let num_blocks = num_blocks.min(parent_table.len());
        if num_blocks == 0 {
            return 0;
        }
        let shared = parent_table[..num_blocks].to_vec();
        self.pool.touch(&shared);
        let table = RequestBlocks {
            blocks: shared,
            num_hashed: 0,
        };
        self.tables.insert(child, table);
        num_blocks * self.block_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TokenId;
    use crate::request::NewRequest;
    use crate::sampling::{SamplerRng, SamplingParams};

    const BS: usize = 4;

    fn manager(num_blocks: usize) -> KvCacheManager {
        KvCacheManager::new(num_blocks, BS, true, BlockHasher::default())
    }

    fn request(id: u64, tokens: Vec<TokenId>) -> Request {
        let new = NewRequest::new(RequestId(id), tokens, SamplingParams::default());
        Request::new(
            new,
            id,
            SamplerRng::from_seed(0),
            &BlockHasher::default(),
            BS,
        )
    }

    fn ids(blocks: &[BlockId]) -> Vec<u32> {
        blocks.iter().map(|b| b.0).collect()
    }

    /// Allocates and computes all of `request`'s tokens, caching its full blocks.
    fn run_prefill(kv: &mut KvCacheManager, request: &mut Request) {
        let cached = kv.find_cached_prefix(request);
        let n = request.num_tokens() - cached.num_tokens;
        kv.allocate_slots(request, n, &cached).unwrap();
        request.num_computed_tokens = request.num_tokens();
        kv.cache_full_blocks(request, request.num_computed_tokens);
    }

    #[test]
    fn blocks_are_allocated_for_exactly_the_tokens_asked_for() {
        let mut kv = manager(8);
        let r = request(1, (0..5).collect());
        let table = kv.allocate_slots(&r, 5, &CachedPrefix::default()).unwrap();
        assert_eq!(ids(table), [0, 1]);
        assert_eq!(kv.num_free_blocks(), 6);
        assert!((kv.usage() - 0.25).abs() < 1e-9);
    }

    #[test]
    fn allocation_that_does_not_fit_changes_nothing() {
        let mut kv = manager(2);
        let r = request(1, (0..12).collect());
        assert!(kv
            .allocate_slots(&r, 12, &CachedPrefix::default())
            .is_none());
        assert_eq!(kv.num_free_blocks(), 2);
        assert!(kv.block_table(RequestId(1)).is_empty());
        assert_eq!(kv.prefix_cache_stats(), PrefixCacheStats::default());
    }

    #[test]
    fn freeing_returns_the_tail_block_first_so_it_is_evicted_first() {
        let mut kv = manager(4);
        let r = request(1, (0..12).collect());
        kv.allocate_slots(&r, 12, &CachedPrefix::default()).unwrap();
        kv.free(RequestId(1));
        assert_eq!(
            ids(&kv.pool().free_order().collect::<Vec<_>>()),
            [3, 2, 1, 0]
        );
    }

    #[test]
    fn the_cached_prefix_stops_at_the_first_missing_block() {
        let mut kv = manager(8);
        let mut a = request(1, (0..12).collect());
        run_prefill(&mut kv, &mut a);
        kv.free(RequestId(1));
        let mut tokens: Vec<TokenId> = (0..8).collect();
        tokens.extend([99, 99, 99, 99, 5]);
        let b = request(2, tokens);
        let cached = kv.find_cached_prefix(&b);
        assert_eq!(ids(&cached.blocks), [0, 1]);
        assert_eq!(cached.num_tokens, 8);
    }

    #[test]
    fn reviving_free_cached_blocks_counts_against_free_blocks() {
        let mut kv = manager(3);
        let mut a = request(1, (0..8).collect());
        run_prefill(&mut kv, &mut a);
        kv.free(RequestId(1));
        // 9 tokens: 2 cached blocks revived + 1 new = all 3 blocks.
        let b = request(2, (0..9).collect());
        let cached = kv.find_cached_prefix(&b);
        assert_eq!(cached.num_tokens, 8);
        let table = kv.allocate_slots(&b, 1, &cached).unwrap().to_vec();
        assert_eq!(ids(&table), [0, 1, 2]);
        assert_eq!(kv.num_free_blocks(), 0);
        kv.free(RequestId(2));
        // 13 tokens need 2 cached + 2 new blocks, but only 3 exist.
        let c = request(3, (0..13).collect());
        let cached = kv.find_cached_prefix(&c);
        assert!(kv.allocate_slots(&c, 5, &cached).is_none());
        assert_eq!(kv.num_free_blocks(), 3);
    }

    #[test]
    fn a_live_shared_block_gains_a_reference() {
        let mut kv = manager(8);
        let mut a = request(1, (0..9).collect());
        run_prefill(&mut kv, &mut a);
        let b = request(2, (0..6).collect());
        let cached = kv.find_cached_prefix(&b);
        kv.allocate_slots(&b, 2, &cached).unwrap();
        assert_eq!(kv.pool().ref_count(BlockId(0)), 2);
        assert_eq!(ids(kv.block_table(RequestId(2))), [0, 3]);
        assert_eq!(kv.prefix_cache_stats().hit_tokens, 4);
    }

    #[test]
    fn prefix_caching_off_finds_nothing() {
        let mut kv = KvCacheManager::new(8, BS, false, BlockHasher::default());
        let mut a = request(1, (0..9).collect());
        run_prefill(&mut kv, &mut a);
        assert_eq!(kv.pool().num_cached_blocks(), 0);
        assert_eq!(
            kv.find_cached_prefix(&request(2, (0..9).collect())),
            CachedPrefix::default()
        );
    }

    #[test]
    fn fork_shares_only_computed_full_prompt_blocks() {
        let mut kv = manager(8);
        let mut parent = request(1, (0..10).collect());
        run_prefill(&mut kv, &mut parent);
        assert_eq!(kv.fork(&parent, RequestId(2)), 8);
        assert_eq!(ids(kv.block_table(RequestId(2))), [0, 1]);
        assert_eq!(kv.pool().ref_count(BlockId(2)), 1);
        // An 8-token prompt shares one block: the child must compute at least one token.
        let mut short = request(3, (20..28).collect());
        run_prefill(&mut kv, &mut short);
        assert_eq!(kv.fork(&short, RequestId(4)), 4);
    }
}
