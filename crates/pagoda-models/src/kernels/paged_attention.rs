//! Attention of each new token over its sequence's paged KV cache, on all cores.
//!
//! Each (token, head) pair is one task: scores against the cached keys block by block with an
//! online softmax (running max and sum, rescaling the partial output), so no score matrix is
//! ever materialised and no exp overflows. A token at position p sees positions up to p only,
//! which makes attention causal among the new tokens and full over the cached context. Keys are
//! visited in logical block order whatever the physical block numbers, so a token's result is
//! the same whichever way its sequence was chunked or batched.

use rayon::prelude::*;

use super::dot::tile;
use crate::batch::ForwardBatch;
use crate::kv_cache::LayerKv;

#[derive(Debug, Clone, Copy)]
pub struct AttentionDims {
    pub num_heads: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
    pub block_size: usize,
    pub sliding_window: Option<usize>,
}

/// `q` and `out` are `[tokens, num_heads * head_dim]`.
pub fn paged_attention(
    q: &[f32],
    kv: &LayerKv,
    batch: &ForwardBatch,
    dims: AttentionDims,
    out: &mut [f32],
) {
    let hd = dims.head_dim;
    debug_assert_eq!(q.len(), batch.num_tokens() * dims.num_heads * hd);
    out.par_chunks_mut(hd).enumerate().for_each(|(row, o)| {
        let token = row / dims.num_heads;
        let head = row % dims.num_heads;
        attend_one(
            &q[row * hd..(row + 1) * hd],
            kv,
            batch,
            dims,
            token,
            head,
            o,
        );
    });
}

fn attend_one(
    q: &[f32],
    kv: &LayerKv,
    batch: &ForwardBatch,
    dims: AttentionDims,
    token: usize,
    head: usize,
    out: &mut [f32],
) {
    let hd = dims.head_dim;
    let bs = dims.block_size;
    let kv_head = head / (dims.num_heads / dims.num_kv_heads);
    let width = dims.num_kv_heads * hd;
    let seq = &batch.sequences[batch.token_sequence[token]];
    let pos = batch.positions[token];
    let end = pos + 1;
    let start = dims.sliding_window.map_or(0, |w| end.saturating_sub(w));
    let scale = 1.0 / (hd as f32).sqrt();

    out.fill(0.0);
    let mut running_max = f32::NEG_INFINITY;
    let mut running_sum = 0.0f32;
    let mut scores = vec![0.0f32; bs];
    for logical in start / bs..=(end - 1) / bs {
        let lo = start.max(logical * bs);
        let hi = end.min((logical + 1) * bs);
        let base = seq.block_table[logical] as usize * bs;
        let offset = |p: usize| (base + p % bs) * width + kv_head * hd;
        let n = hi - lo;
        let mut j = 0;
        while j < n {
            let take = (n - j).min(4);
            // SAFETY: the batch was validated against the cache, so every slot of the block
            // exists and holds `width` floats; `q` has `hd` floats.
            unsafe {
                let k = kv.k.as_ptr();
                match take {
                    4 => {
                        let r = tile::<f32, 4, 1>(
                            std::array::from_fn(|i| k.add(offset(lo + j + i))),
                            [q.as_ptr()],
                            hd,
                        );
                        for i in 0..4 {
                            scores[j + i] = r[i][0] * scale;
                        }
                    }
                    _ => {
                        for i in 0..take {
                            let r =
                                tile::<f32, 1, 1>([k.add(offset(lo + j + i))], [q.as_ptr()], hd);
                            scores[j + i] = r[0][0] * scale;
                        }
                    }
                }
            }
            j += take;
        }
        let block_max = scores[..n]
            .iter()
            .copied()
            .fold(f32::NEG_INFINITY, f32::max);
        let new_max = running_max.max(block_max);
        let correction = (running_max - new_max).exp();
        running_sum *= correction;
        for v in out.iter_mut() {
            *v *= correction;
        }
        for (i, s) in scores[..n].iter().enumerate() {
            let p = (s - new_max).exp();
            running_sum += p;
            let v_off = offset(lo + i);
            for (o, v) in out.iter_mut().zip(&kv.v[v_off..v_off + hd]) {
                *o += p * v;
            }
        }
        running_max = new_max;
    }
    let inv = 1.0 / running_sum;
    for v in out.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::LogitsWanted;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1009) as f32 / 504.0 - 1.0)
            .collect()
    }

    /// Plain softmax attention over contiguous K/V for one query.
    fn reference(q: &[f32], ks: &[Vec<f32>], vs: &[Vec<f32>]) -> Vec<f32> {
        let scale = 1.0 / (q.len() as f64).sqrt();
        let s: Vec<f64> = ks
            .iter()
            .map(|k| {
                k.iter()
                    .zip(q)
                    .map(|(a, b)| (*a as f64) * (*b as f64))
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..q.len())
            .map(|d| (e.iter().zip(vs).map(|(p, v)| p * v[d] as f64).sum::<f64>() / z) as f32)
            .collect()
    }

    #[test]
    fn matches_softmax_attention_with_gqa_and_scattered_blocks() {
        let dims = AttentionDims {
            num_heads: 4,
            num_kv_heads: 2,
            head_dim: 8,
            block_size: 4,
            sliding_window: None,
        };
        let width = 16;
        let num_blocks = 6;
        let mut kv = LayerKv {
            k: vec![0.0; num_blocks * 4 * width],
            v: vec![0.0; num_blocks * 4 * width],
        };
        let table = [5u32, 1, 3];
        let tokens = 10;
        let k_new = values(tokens * width, 1);
        let v_new = values(tokens * width, 2);
        let mut batch = ForwardBatch::new(4);
        batch
            .push(&vec![0; tokens], 0, &table, LogitsWanted::Last)
            .unwrap();
        kv.write(&batch.slot_mapping, &k_new, &v_new, width);
        let q = values(tokens * 32, 3);
        let mut out = vec![0.0; tokens * 32];
        paged_attention(&q, &kv, &batch, dims, &mut out);
        for t in 0..tokens {
            for h in 0..4 {
                let g = h / 2;
                let ks: Vec<Vec<f32>> = (0..=t)
                    .map(|p| k_new[p * width + g * 8..p * width + g * 8 + 8].to_vec())
                    .collect();
                let vs: Vec<Vec<f32>> = (0..=t)
                    .map(|p| v_new[p * width + g * 8..p * width + g * 8 + 8].to_vec())
                    .collect();
                let want = reference(&q[(t * 4 + h) * 8..(t * 4 + h + 1) * 8], &ks, &vs);
                let got = &out[(t * 4 + h) * 8..(t * 4 + h + 1) * 8];
                for d in 0..8 {
                    assert!((got[d] - want[d]).abs() < 1e-5, "t={t} h={h} d={d}");
                }
            }
        }
    }
}
