//! The SwiGLU feed-forward block: `down(silu(gate(x)) * up(x))`, gate and up fused.

use super::scratch::MlpScratch;
use super::Linear;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::kernels::Isa;
use crate::weights::WeightSource;

#[derive(Debug, Clone)]
pub struct GatedMlp {
    gate_up: Linear,
    down: Linear,
    intermediate: usize,
}

impl GatedMlp {
    pub fn load(src: &dyn WeightSource, prefix: &str, cfg: &ModelConfig) -> Result<Self> {
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let gate = Linear::load(src, &format!("{prefix}.gate_proj"), h, i, false)?;
        let up = Linear::load(src, &format!("{prefix}.up_proj"), h, i, false)?;
        Ok(GatedMlp {
            gate_up: Linear::fuse(vec![gate, up]),
            down: Linear::load(src, &format!("{prefix}.down_proj"), i, h, false)?,
            intermediate: i,
        })
    }

    pub fn for_each_weight(&self, f: &mut dyn FnMut(&crate::weight_matrix::WeightMatrix)) {
        f(&self.gate_up.weight);
        f(&self.down.weight);
    }

    pub fn weight_bytes(&self) -> usize {
        self.gate_up.weight.size_in_bytes() + self.down.weight.size_in_bytes()
    }

    /// `x` is `[n, hidden]`; returns `[n, hidden]`, held in `scratch`.
    pub fn forward<'s>(
        &self,
        isa: Isa,
        x: &[f32],
        n: usize,
        scratch: &'s mut MlpScratch,
    ) -> &'s [f32] {
        let i = self.intermediate;
        let gate_up = scratch.gate_up.at_least(n * self.gate_up.out_dim());
        self.gate_up.forward(isa, x, n, gate_up);
        let act = scratch.act.at_least(n * i);
        crate::kernels::silu_mul(isa, gate_up, act, i);
        let out = scratch.out.at_least(n * self.down.out_dim());
        self.down.forward(isa, act, n, out);
        out
    }
}
