//! Rotary position embeddings (the "rotate half" layout of Hugging Face checkpoints), with
//! linear and llama3 frequency scaling.

use crate::config::{ModelConfig, RopeScaling};

#[derive(Debug, Clone)]
pub struct Rotary {
    inv_freq: Vec<f32>,
}

/// cos and sin per token of one forward pass, shared by every layer.
pub struct RotaryTable {
    half: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rotary {
    pub fn new(cfg: &ModelConfig) -> Self {
        let dim = cfg.head_dim;
        // Computed in f32 like transformers, so angles match to the last bit or two.
        let base = cfg.rope_theta as f32;
        let inv_freq: Vec<f32> = (0..dim / 2)
            .map(|i| 1.0 / base.powf((2 * i) as f32 / dim as f32))
            .collect();
        Rotary {
            inv_freq: scale_frequencies(inv_freq, &cfg.rope_scaling),
        }
    }

    pub fn table(&self, positions: &[usize]) -> RotaryTable {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(positions.len() * half);
        let mut sin = Vec::with_capacity(positions.len() * half);
        for &p in positions {
            for &f in &self.inv_freq {
                let angle = p as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        RotaryTable { half, cos, sin }
    }
}

impl RotaryTable {
    /// Rotates every head of every token in `x` (`[tokens, heads * head_dim]`).
    pub fn apply(&self, x: &mut [f32], heads: usize) {
        let head_dim = 2 * self.half;
        crate::kernels::for_each_row(x, heads * head_dim, |t, row| {
            let cos = &self.cos[t * self.half..(t + 1) * self.half];
            let sin = &self.sin[t * self.half..(t + 1) * self.half];
            for head in row.chunks_exact_mut(head_dim) {
                let (a, b) = head.split_at_mut(self.half);
                for i in 0..self.half {
                    let (x1, x2) = (a[i], b[i]);
                    a[i] = x1 * cos[i] - x2 * sin[i];
                    b[i] = x2 * cos[i] + x1 * sin[i];
                }
            }
        });
    }
}

fn scale_frequencies(inv_freq: Vec<f32>, scaling: &RopeScaling) -> Vec<f32> {
    match *scaling {
        RopeScaling::None => inv_freq,
        RopeScaling::Factors(ref divisors) => inv_freq
            .into_iter()
            .zip(divisors)
            .map(|(f, d)| f / d)
            .collect(),
        RopeScaling::Linear { factor } => inv_freq.into_iter().map(|f| f / factor as f32).collect(),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => {
            let (factor, low, high) = (
                factor as f32,
                low_freq_factor as f32,
                high_freq_factor as f32,
            );
            let old_len = original_max_position_embeddings as f32;
            let low_freq_wavelen = old_len / low;
            let high_freq_wavelen = old_len / high;
            inv_freq
                .into_iter()
                .map(|f| {
                    let wavelen = 2.0 * std::f32::consts::PI / f;
                    if wavelen < high_freq_wavelen {
                        f
                    } else if wavelen > low_freq_wavelen {
                        f / factor
                    } else {
                        // Between the two: blend the scaled and unscaled frequency.
                        let smooth = (old_len / wavelen - low) / (high - low);
                        (1.0 - smooth) * f / factor + smooth * f
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_preserves_norm_and_position_zero_is_identity() {
        let cfg = crate::config::ModelConfig::from_json(
            r#"{"architectures":["LlamaForCausalLM"],"hidden_size":16,"intermediate_size":32,
            "num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10,
            "max_position_embeddings":64}"#,
        )
        .unwrap();
        let rotary = Rotary::new(&cfg);
        let x: Vec<f32> = (0..32).map(|i| i as f32 * 0.1 - 1.0).collect();
        let mut moved = x.clone();
        rotary.table(&[0, 5]).apply(&mut moved, 2);
        assert_eq!(&moved[..16], &x[..16]);
        let norm = |v: &[f32]| v.iter().map(|a| a * a).sum::<f32>();
        assert!((norm(&moved[16..]) - norm(&x[16..])).abs() < 1e-4);
        assert_ne!(&moved[16..], &x[16..]);
    }

    #[test]
    fn llama3_scaling_keeps_high_and_divides_low_frequencies() {
        let scaled = scale_frequencies(
            vec![1.0, 0.0001],
            &RopeScaling::Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 8192,
            },
        );
        assert_eq!(scaled[0], 1.0);
        assert!((scaled[1] - 0.0001 / 8.0).abs() < 1e-9);
    }
}
