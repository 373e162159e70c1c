//! Paged KV storage: per layer, K and V as `[num_blocks, block_size, num_kv_heads, head_dim]`.
//! Which block belongs to which sequence is decided elsewhere (the engine's block manager);
//! this only holds the numbers.

use crate::config::ModelConfig;
use crate::error::{ModelError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCacheShape {
    pub num_layers: usize,
    pub num_blocks: usize,
    pub block_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl KvCacheShape {
    /// Bytes one block takes across all layers, K and V (f32 storage).
    pub fn bytes_per_block(cfg: &ModelConfig, block_size: usize) -> u64 {
        (2 * cfg.num_layers
            * block_size
            * cfg.num_kv_heads
            * cfg.head_dim
            * std::mem::size_of::<f32>()) as u64
    }

    /// As many blocks as fit in `budget_bytes`; fails if one sequence of `max_model_len`
    /// tokens would not fit.
    pub fn from_budget(
        cfg: &ModelConfig,
        block_size: usize,
        budget_bytes: u64,
        max_model_len: usize,
    ) -> Result<Self> {
        if block_size == 0 {
            return Err(ModelError::field("block_size", "must be positive"));
        }
        let num_blocks = (budget_bytes / Self::bytes_per_block(cfg, block_size)) as usize;
        let needed_blocks = max_model_len.div_ceil(block_size);
        if num_blocks < needed_blocks || num_blocks == 0 {
            return Err(ModelError::KvBudgetTooSmall {
                budget_bytes,
                blocks: num_blocks,
                block_size,
                needed_tokens: max_model_len,
                needed_blocks,
            });
        }
        Ok(KvCacheShape {
            num_layers: cfg.num_layers,
            num_blocks,
            block_size,
            num_kv_heads: cfg.num_kv_heads,
            head_dim: cfg.head_dim,
        })
    }

    pub fn num_slots(&self) -> usize {
        self.num_blocks * self.block_size
    }

    /// Floats per token slot of one layer's K (or V).
    pub fn slot_width(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }

    pub fn total_bytes(&self) -> u64 {
        (2 * self.num_layers * self.num_slots() * self.slot_width() * std::mem::size_of::<f32>())
            as u64
    }
}

/// One layer's K and V.
pub struct LayerKv {
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

pub struct PagedKvCache {
    pub shape: KvCacheShape,
    pub layers: Vec<LayerKv>,
}

impl PagedKvCache {
    pub fn new(shape: KvCacheShape) -> Self {
        let len = shape.num_slots() * shape.slot_width();
        let layers = (0..shape.num_layers)
            .map(|_| LayerKv {
                k: vec![0.0; len],
                v: vec![0.0; len],
            })
            .collect();
        PagedKvCache { shape, layers }
    }
}

impl LayerKv {
    /// Stores each token's K and V rows (`[tokens, slot_width]`) at its slot.
    pub fn write(&mut self, slots: &[usize], k: &[f32], v: &[f32], width: usize) {
        for (t, &slot) in slots.iter().enumerate() {
            let dst = slot * width..(slot + 1) * width;
            self.k[dst.clone()].copy_from_slice(&k[t * width..(t + 1) * width]);
            self.v[dst].copy_from_slice(&v[t * width..(t + 1) * width]);
        }
    }
}
