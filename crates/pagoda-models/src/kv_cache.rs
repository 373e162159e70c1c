//! Paged KV storage: per layer, K and V as `[num_blocks, block_size, num_kv_heads, head_dim]`,
//! in f32 or a 16-bit type (half the memory, so twice the context per GiB). Which block
//! belongs to which sequence is decided elsewhere (the engine's block manager); this only
//! holds the numbers.

use half::{bf16, f16};

use crate::aligned::AlignedVec;
use crate::config::ModelConfig;
use crate::error::{ModelError, Result};
use crate::kernels::Elem;
use crate::matrix::WeightDtype;

/// What the KV cache stores, as vLLM's `--kv-cache-dtype`: `Auto` follows the weights, so a
/// 16-bit checkpoint gets a 16-bit cache (half the memory of f32) and an f32 one keeps f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvCacheDtype {
    #[default]
    Auto,
    Fixed(WeightDtype),
}

impl KvCacheDtype {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(KvCacheDtype::Auto),
            other => WeightDtype::parse(other).map(KvCacheDtype::Fixed),
        }
    }

    pub fn resolve(self, weights: WeightDtype) -> WeightDtype {
        match self {
            KvCacheDtype::Auto => weights,
            KvCacheDtype::Fixed(dtype) => dtype,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvCacheShape {
    pub num_layers: usize,
    pub num_blocks: usize,
    pub block_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    /// What K and V are stored as.
    pub dtype: WeightDtype,
}

impl KvCacheShape {
    /// Bytes one block takes across all layers, K and V.
    pub fn bytes_per_block(cfg: &ModelConfig, block_size: usize, dtype: WeightDtype) -> u64 {
        (2 * cfg.num_layers * block_size * cfg.num_kv_heads * cfg.head_dim * dtype.size_in_bytes())
            as u64
    }

    /// As many blocks as fit in `budget_bytes`; fails if one sequence of `max_model_len`
    /// tokens would not fit.
    pub fn from_budget(
        cfg: &ModelConfig,
        block_size: usize,
        budget_bytes: u64,
        max_model_len: usize,
        dtype: WeightDtype,
    ) -> Result<Self> {
        if block_size == 0 {
            return Err(ModelError::field("block_size", "must be positive"));
        }
        let num_blocks = (budget_bytes / Self::bytes_per_block(cfg, block_size, dtype)) as usize;
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
            dtype,
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
        (2 * self.num_layers * self.num_slots() * self.slot_width() * self.dtype.size_in_bytes())
            as u64
    }
}

/// Where a token's keys and values sit in one layer's storage.
///
/// V is `[slot][kv_head][head_dim]`: attention adds whole value rows. K is stored transposed
/// within each block, `[block][kv_head][head_dim][block_size]`, so one vector load takes the
/// same dimension of 16 consecutive keys and scores 16 keys at once without a horizontal sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    pub block_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl KvLayout {
    /// Elements one token slot takes in K (or V).
    pub fn slot_width(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }

    /// Index of dimension 0 of key `slot`, head `kv_head`; dimension `d` is `d * block_size`
    /// further on.
    pub fn key(&self, slot: usize, kv_head: usize) -> usize {
        let (block, j) = (slot / self.block_size, slot % self.block_size);
        (block * self.num_kv_heads + kv_head) * self.head_dim * self.block_size + j
    }

    /// Index of value `slot`, head `kv_head` (its `head_dim` elements are contiguous).
    pub fn value(&self, slot: usize, kv_head: usize) -> usize {
        slot * self.slot_width() + kv_head * self.head_dim
    }
}

/// One layer's K (or V) values, in the cache's dtype, starting on a cache line: a 64-value
/// head row of f16 is then two whole lines, not three.
pub enum KvData {
    F32(AlignedVec<f32>),
    F16(AlignedVec<f16>),
    BF16(AlignedVec<bf16>),
}

impl KvData {
    fn zeros(dtype: WeightDtype, len: usize) -> Self {
        match dtype {
            WeightDtype::F32 => KvData::F32(AlignedVec::zeroed(len)),
            WeightDtype::F16 => KvData::F16(AlignedVec::zeroed(len)),
            WeightDtype::BF16 => KvData::BF16(AlignedVec::zeroed(len)),
        }
    }

    /// Stores `rows` (`[tokens, slot_width]`), element `(t, i)` at `index(slots[t], i)`.
    fn write(
        &mut self,
        slots: &[usize],
        rows: &[f32],
        width: usize,
        index: impl Fn(usize, usize) -> usize,
    ) {
        match self {
            KvData::F32(v) => write_rows(v, slots, rows, width, index),
            KvData::F16(v) => write_rows(v, slots, rows, width, index),
            KvData::BF16(v) => write_rows(v, slots, rows, width, index),
        }
    }
}

fn write_rows<T: Elem>(
    dst: &mut [T],
    slots: &[usize],
    rows: &[f32],
    width: usize,
    index: impl Fn(usize, usize) -> usize,
) {
    for (row, &slot) in rows.chunks_exact(width).zip(slots) {
        for (i, &value) in row.iter().enumerate() {
            dst[index(slot, i)] = T::from_f32(value);
        }
    }
}

/// One layer's K and V.
pub struct LayerKv {
    pub k: KvData,
    pub v: KvData,
    pub layout: KvLayout,
}

pub struct PagedKvCache {
    pub shape: KvCacheShape,
    pub layers: Vec<LayerKv>,
}

impl PagedKvCache {
    pub fn new(shape: KvCacheShape) -> Self {
        let layout = KvLayout {
            block_size: shape.block_size,
            num_kv_heads: shape.num_kv_heads,
            head_dim: shape.head_dim,
        };
        let layers = (0..shape.num_layers)
            .map(|_| LayerKv::new(shape.dtype, shape.num_blocks, layout))
            .collect();
        PagedKvCache { shape, layers }
    }
}

impl LayerKv {
    pub fn new(dtype: WeightDtype, num_blocks: usize, layout: KvLayout) -> Self {
        let len = num_blocks * layout.block_size * layout.slot_width();
        LayerKv {
            k: KvData::zeros(dtype, len),
            v: KvData::zeros(dtype, len),
            layout,
        }
    }

    /// Stores each token's K and V rows (`[tokens, slot_width]`) at its slot.
    pub fn write(&mut self, slots: &[usize], k: &[f32], v: &[f32]) {
        let l = self.layout;
        let (hd, bs) = (l.head_dim, l.block_size);
        let width = l.slot_width();
        self.k.write(slots, k, width, |slot, i| {
            l.key(slot, i / hd) + (i % hd) * bs
        });
        self.v
            .write(slots, v, width, |slot, i| l.value(slot, 0) + i);
    }
}
