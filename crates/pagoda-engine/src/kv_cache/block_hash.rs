//! Chained 128-bit hashes of full token blocks.
//!
//! `hash(block i) = xxh3_128(parent = hash(block i-1) or the seeded root, token ids, extra keys)`.
//! Only full blocks are hashed: a partial block's KV is still growing and is never shared.
//! The extra keys (today the cache salt; later the LoRA adapter) go into every block, not just
//! the first, so a stored block can be confirmed against its own key alone (see
//! `prefix_index`). The hash is 128 bits, and a hit is still confirmed against the stored token
//! ids, parent hash and salt, so a collision cannot hand one request another's KV.
//!
//! xxh3-128 (crate `xxhash-rust`, no dependencies of its own) is stable across versions and
//! platforms, which a router that computes the same hashes on another machine needs; std's
//! `DefaultHasher` promises neither that nor 128 bits.

use crate::ids::{BlockHash, CacheSalt, TokenId};
use xxhash_rust::xxh3::Xxh3;

/// Everything besides the token ids that decides whether two blocks may share KV.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtraKeys<'a> {
    /// Requests with different salts never share KV (per tenant by default).
    pub cache_salt: Option<&'a CacheSalt>,
}

/// The full input of one block's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockKey<'a> {
    pub parent: BlockHash,
    pub tokens: &'a [TokenId],
    pub extra: ExtraKeys<'a>,
}

/// Hashes blocks from a seeded root. Replicas that must agree on hashes use the same seed.
#[derive(Clone, Copy, Debug)]
pub struct BlockHasher {
    root: BlockHash,
}

/// Seed of the root hash when none is configured.
pub const DEFAULT_HASH_SEED: u64 = 0x5061_676f_6461; // "Pagoda"

impl Default for BlockHasher {
    fn default() -> Self {
        Self::new(DEFAULT_HASH_SEED)
    }
}

impl BlockHasher {
    pub fn new(seed: u64) -> Self {
        let mut h = Xxh3::new();
        h.update(b"pagoda-block-hash-root");
        h.update(&seed.to_le_bytes());
        Self {
            root: BlockHash(h.digest128()),
        }
    }

    /// The parent hash of a sequence's first block.
    pub fn root(&self) -> BlockHash {
        self.root
    }

    pub fn hash(&self, key: &BlockKey<'_>) -> BlockHash {
        let mut h = Xxh3::new();
        h.update(&key.parent.0.to_le_bytes());
        h.update(&(key.tokens.len() as u64).to_le_bytes());
        for token in key.tokens {
            h.update(&token.to_le_bytes());
        }
        // Tagged and length-prefixed, so "no salt" and "empty salt" differ and future keys
        // cannot be confused with the salt.
        match key.extra.cache_salt {
            None => h.update(&[0]),
            Some(salt) => {
                h.update(&[1]);
                let salt = salt.as_str();
                h.update(&(salt.len() as u64).to_le_bytes());
                h.update(salt.as_bytes());
            }
        }
        BlockHash(h.digest128())
    }

    /// Extends `hashes` (the hashes of the first `hashes.len()` blocks of `tokens`) with the
    /// hashes of every further full block of `tokens`.
    pub fn extend_hashes(
        &self,
        tokens: &[TokenId],
        block_size: usize,
        extra: ExtraKeys<'_>,
        hashes: &mut Vec<BlockHash>,
    ) {
        let num_full = tokens.len() / block_size;
        while hashes.len() < num_full {
            let i = hashes.len();
            let parent = if i == 0 { self.root } else { hashes[i - 1] };
            let key = BlockKey {
                parent,
                tokens: &tokens[i * block_size..(i + 1) * block_size],
                extra,
            };
            hashes.push(self.hash(&key));
        }
    }

    /// The hashes of all full blocks of `tokens`.
    pub fn hash_blocks(
        &self,
        tokens: &[TokenId],
        block_size: usize,
        extra: ExtraKeys<'_>,
    ) -> Vec<BlockHash> {
        let mut hashes = Vec::new();
        self.extend_hashes(tokens, block_size, extra, &mut hashes);
        hashes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_SALT: ExtraKeys<'static> = ExtraKeys { cache_salt: None };

    fn salted(salt: &CacheSalt) -> ExtraKeys<'_> {
        ExtraKeys {
            cache_salt: Some(salt),
        }
    }

    fn salt(s: &str) -> CacheSalt {
        CacheSalt::new(s)
    }

    #[test]
    fn only_full_blocks_are_hashed() {
        let hasher = BlockHasher::default();
        assert_eq!(hasher.hash_blocks(&[1, 2, 3], 4, NO_SALT).len(), 0);
        assert_eq!(hasher.hash_blocks(&[1, 2, 3, 4, 5], 4, NO_SALT).len(), 1);
        assert_eq!(hasher.hash_blocks(&[0; 8], 4, NO_SALT).len(), 2);
    }

    #[test]
    fn same_tokens_and_salt_give_the_same_hashes() {
        let hasher = BlockHasher::default();
        let a = hasher.hash_blocks(&[1, 2, 3, 4, 5, 6, 7, 8], 4, salted(&salt("t1")));
        let b = hasher.hash_blocks(&[1, 2, 3, 4, 5, 6, 7, 8], 4, salted(&salt("t1")));
        assert_eq!(a, b);
    }

    #[test]
    fn same_tokens_with_a_different_salt_give_different_hashes() {
        let hasher = BlockHasher::default();
        let tokens = [1, 2, 3, 4];
        let none = hasher.hash_blocks(&tokens, 4, NO_SALT);
        let empty = hasher.hash_blocks(&tokens, 4, salted(&salt("")));
        let t1 = hasher.hash_blocks(&tokens, 4, salted(&salt("t1")));
        let t2 = hasher.hash_blocks(&tokens, 4, salted(&salt("t2")));
        assert_ne!(none, empty);
        assert_ne!(none, t1);
        assert_ne!(t1, t2);
    }

    #[test]
    fn a_block_hash_depends_on_its_parent() {
        let hasher = BlockHasher::default();
        let a = hasher.hash_blocks(&[1, 2, 3, 4, 9, 9, 9, 9], 4, NO_SALT);
        let b = hasher.hash_blocks(&[5, 6, 7, 8, 9, 9, 9, 9], 4, NO_SALT);
        assert_ne!(a[1], b[1], "same second block, different first block");
        let direct = hasher.hash(&BlockKey {
            parent: a[0],
            tokens: &[9, 9, 9, 9],
            extra: NO_SALT,
        });
        assert_eq!(direct, a[1]);
        let first = hasher.hash(&BlockKey {
            parent: hasher.root(),
            tokens: &[1, 2, 3, 4],
            extra: NO_SALT,
        });
        assert_eq!(first, a[0]);
    }

    #[test]
    fn the_root_depends_on_the_seed() {
        assert_ne!(BlockHasher::new(1).root(), BlockHasher::new(2).root());
        let a = BlockHasher::new(1).hash_blocks(&[1, 2], 2, NO_SALT);
        let b = BlockHasher::new(2).hash_blocks(&[1, 2], 2, NO_SALT);
        assert_ne!(a, b);
    }

    #[test]
    fn extending_hashes_matches_hashing_from_scratch() {
        let hasher = BlockHasher::default();
        let tokens: Vec<TokenId> = (0..13).collect();
        let s = salt("s");
        let mut hashes = hasher.hash_blocks(&tokens[..5], 4, salted(&s));
        hasher.extend_hashes(&tokens, 4, salted(&s), &mut hashes);
        assert_eq!(hashes, hasher.hash_blocks(&tokens, 4, salted(&s)));
        assert_eq!(hashes.len(), 3);
    }
}
