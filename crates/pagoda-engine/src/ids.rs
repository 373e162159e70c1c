//! Identifier newtypes shared by the whole engine core.
//!
//! Ids are never bare integers (style rule 2): a block id cannot be passed where a request id is
//! expected. Token ids stay a plain alias because they flow straight into tensors and tokenizers
//! by the million, and no other integer in this crate is easily confused with them.

use std::fmt;
use std::sync::Arc;

/// A token id as the tokenizer and the model's vocabulary number it.
pub type TokenId = u32;

/// One request (one sequence: a request with `n > 1` is several of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// The index of a KV block in the runner's `[num_blocks, block_size, ..]` storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub u32);

/// The 128-bit chained hash of one full block of tokens (see `kv_cache::block_hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockHash(pub u128);

/// A prefix-cache salt: requests share KV blocks only when their salts are equal (per tenant by
/// default). Made once per request and shared, by reference count, down to the prefix index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CacheSalt(Arc<str>);

/// Whose work a sequence is, for fair queueing: the scheduler shares running slots between
/// tenants with waiting work. Requests without one belong to the anonymous tenant, a group of
/// its own.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantKey(Arc<str>);

impl CacheSalt {
    pub fn new(salt: impl Into<Arc<str>>) -> Self {
        Self(salt.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TenantKey {
    pub fn new(tenant: impl Into<Arc<str>>) -> Self {
        Self(tenant.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CacheSalt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for TenantKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl BlockId {
    /// The block's index into per-block arrays.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "req-{}", self.0)
    }
}

impl fmt::Display for BlockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "block-{}", self.0)
    }
}

impl fmt::Display for BlockHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}
