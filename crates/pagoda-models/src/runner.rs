//! The model runner: a loaded model plus its paged KV storage. The scheduler hands it a
//! `ForwardBatch`; it returns the logits of the rows asked for.

use crate::batch::ForwardBatch;
use crate::error::{ModelError, Result};
use crate::kernels::Isa;
use crate::kv_cache::{KvCacheShape, PagedKvCache};
use crate::model::CausalLm;

pub struct ModelRunner {
    model: CausalLm,
    cache: PagedKvCache,
    isa: Isa,
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
    /// A runner on the process's kernel path (`kernels::isa`).
    pub fn new(model: CausalLm, shape: KvCacheShape) -> Self {
        ModelRunner {
            model,
            cache: PagedKvCache::new(shape),
            isa: crate::kernels::isa(),
        }
    }

    /// A runner on a given kernel path; an error if this CPU lacks it.
    pub fn with_isa(model: CausalLm, shape: KvCacheShape, isa: Isa) -> Result<Self> {
        if !isa.is_supported() {
            return Err(ModelError::UnsupportedKernels(isa));
        }
        let mut runner = ModelRunner::new(model, shape);
        runner.isa = isa;
        Ok(runner)
    }

    pub fn isa(&self) -> Isa {
        self.isa
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
            return Err(ModelError::InvalidBatch(format!(
                "batch block size {} differs from the cache's {}",
                batch.block_size, self.cache.shape.block_size
            )));
        }
        batch.validate(
            self.cache.shape.num_blocks,
            cfg.vocab_size,
            cfg.max_position_embeddings,
        )?;
        // The kernels' loops run on their own threads (`kernels/pool.rs`), with this thread
        // taking tasks alongside them.
        let data = self.model.forward(self.isa, batch, &mut self.cache);
        Ok(Logits {
            vocab_size: cfg.vocab_size,
            data,
        })
    }
}
