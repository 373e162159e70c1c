//! A request's leading block hashes, computed as the engine computes them, from the token ids
//! a replica renders for it (`/v1/completions/render`, `/v1/chat/completions/render`).

use pagoda_engine::kv_cache::{BlockHasher, ExtraKeys};
use pagoda_engine::CacheSalt;
use serde_json::Value;

#[derive(Clone, Copy, Debug)]
pub struct PrefixHasher {
    hasher: BlockHasher,
    block_size: usize,
}

impl PrefixHasher {
    /// `seed` and `block_size` must be the replicas'.
    pub fn new(seed: u64, block_size: usize) -> Self {
        Self {
            hasher: BlockHasher::new(seed),
            block_size,
        }
    }

    /// The announced (64-bit) hashes of the full blocks of `tokens`.
    pub fn hashes(&self, tokens: &[u32], salt: Option<&str>) -> Vec<u64> {
        let salt = salt.map(CacheSalt::new);
        let extra = ExtraKeys {
            cache_salt: salt.as_ref(),
        };
        self.hasher
            .hash_blocks(tokens, self.block_size, extra)
            .into_iter()
            .map(|h| h.0 as u64)
            .collect()
    }
}

/// The render endpoint for a request path, if the picker hashes its prompt.
pub fn render_path(path: &str) -> Option<&'static str> {
    match path {
        "/v1/completions" => Some("/v1/completions/render"),
        "/v1/chat/completions" => Some("/v1/chat/completions/render"),
        _ => None,
    }
}

/// Token ids from a render answer: an object, or an array of them (the first prompt's).
pub fn token_ids(rendered: &Value) -> Option<Vec<u32>> {
    let first = match rendered {
        Value::Array(items) => items.first()?,
        other => other,
    };
    first["token_ids"]
        .as_array()?
        .iter()
        .map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
        .collect()
}
