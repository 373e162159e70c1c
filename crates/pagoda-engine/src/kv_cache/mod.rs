//! Paged KV-cache bookkeeping: which blocks hold which request's KV. No tensors here; the runner
//! owns the storage and reads block tables from the scheduled batch.

pub mod block_hash;
pub mod block_pool;
pub mod events;
pub mod free_queue;
pub mod manager;
pub mod prefix_index;

pub use block_hash::{BlockHasher, BlockKey, ExtraKeys};
pub use block_pool::BlockPool;
pub use events::{KvCacheEvent, KvEventLog};
pub use free_queue::FreeQueue;
pub use manager::{CachedPrefix, KvCacheManager, PrefixCacheStats};
pub use prefix_index::PrefixIndex;

use crate::ids::BlockId;

/// The KV slot of token position `pos`: `block_table[pos / block_size] * block_size + pos %
/// block_size`.
///
/// # Panics
/// If the block table does not cover `pos`.
pub fn slot_for(block_table: &[BlockId], block_size: usize, pos: usize) -> usize {
    block_table[pos / block_size].index() * block_size + pos % block_size
}
