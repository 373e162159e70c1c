//! The model runner: a loaded model plus its paged KV storage. The scheduler hands it a
//! `ForwardBatch`; it returns the logits of the rows asked for.

use crate::batch::ForwardBatch;
use crate::error::Result;
use crate::kv_cache::{KvCacheShape, PagedKvCache};
use crate::model::CausalLm;

pub struct ModelRunner {
    model: CausalLm,
    cache: PagedKvCache,
}

/// Logits of the requested rows, `[rows, vocab_size]`.
#[derive(Debug, Clone)]
pub struct Logits {
    pub vocab_size: usize,
    pub data: Vec<f32>,
}

impl Logits {
    pub fn num_rows(&self) -> usize {
        self.data.len() / self.vocab_size
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.vocab_size..(i + 1) * self.vocab_size]
    }
}

impl ModelRunner {
    pub fn new(model: CausalLm, shape: KvCacheShape) -> Self {
        ModelRunner {
            model,
            cache: PagedKvCache::new(shape),
        }
    }

    pub fn model(&self) -> &CausalLm {
        &self.model
    }

    pub fn kv_shape(&self) -> KvCacheShape {
        self.cache.shape
    }

    pub fn forward(&mut self, batch: &ForwardBatch) -> Result<Logits> {
        let cfg = &self.model.config;
        if batch.block_size != self.cache.shape.block_size {
            return Err(crate::ModelError::InvalidBatch(format!(
                "batch block size {} differs from the cache's {}",
                batch.block_size, self.cache.shape.block_size
            )));
        }
        batch.validate(
            self.cache.shape.num_blocks,
            cfg.vocab_size,
            cfg.max_position_embeddings,
        )?;
        let data = self.model.forward(batch, &mut self.cache);
        Ok(Logits {
            vocab_size: cfg.vocab_size,
            data,
        })
    }
}
