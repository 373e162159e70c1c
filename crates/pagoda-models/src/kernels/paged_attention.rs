//! Attention of each new token over its sequence's paged KV cache, on all cores.
//!
//! One task per (token, KV head): the query heads sharing that KV head (grouped-query
//! attention) are scored together, so each cached key and value is read once per group.
//! Scores go block by block with an online softmax (running max and sum, rescaling the
//! partial output), so no score matrix is materialised and no exp overflows. A token at
//! position p sees positions up to p only, which makes attention causal among the new tokens
//! and full over the cached context. Keys are visited in logical block order whatever the
//! physical block numbers, so a token's result is the same whichever way its sequence was
//! chunked or batched, and (the kernels' order being fixed) on every kernel path.

use rayon::prelude::*;

use super::dot::scale_add;
use super::isa::{isa, Isa};
use super::simd::{exp, multiversion, Elem, Simd16, LANES};
use crate::batch::ForwardBatch;
use crate::kv_cache::{KvData, KvLayout, LayerKv};

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
    paged_attention_with(isa(), q, kv, batch, dims, out);
}

/// `paged_attention` on a given kernel path.
pub fn paged_attention_with(
    isa: Isa,
    q: &[f32],
    kv: &LayerKv,
    batch: &ForwardBatch,
    dims: AttentionDims,
    out: &mut [f32],
) {
    assert!(isa.is_supported(), "kernel path {isa} not supported here");
    assert_eq!(q.len(), batch.num_tokens() * dims.num_heads * dims.head_dim);
    assert_eq!(out.len(), q.len());
    let l = kv.layout;
    assert_eq!(
        (l.block_size, l.num_kv_heads, l.head_dim),
        (dims.block_size, dims.num_kv_heads, dims.head_dim),
        "attention dims differ from the cache layout"
    );
    match (&kv.k, &kv.v) {
        (KvData::F32(k), KvData::F32(v)) => run(isa, k, v, l, q, batch, dims, out),
        (KvData::F16(k), KvData::F16(v)) => run(isa, k, v, l, q, batch, dims, out),
        (KvData::BF16(k), KvData::BF16(v)) => run(isa, k, v, l, q, batch, dims, out),
        _ => unreachable!("K and V are allocated with one dtype"),
    }
}

#[allow(clippy::too_many_arguments)]
fn run<W: Elem>(
    isa: Isa,
    k: &[W],
    v: &[W],
    layout: KvLayout,
    q: &[f32],
    batch: &ForwardBatch,
    dims: AttentionDims,
    out: &mut [f32],
) {
    // The query heads of one KV head are consecutive, so a group's rows are one chunk.
    let group_len = dims.num_heads / dims.num_kv_heads * dims.head_dim;
    out.par_chunks_mut(group_len)
        .zip(q.par_chunks(group_len))
        .enumerate()
        .for_each(|(task, (o, q))| {
            let token = task / dims.num_kv_heads;
            let kv_head = task % dims.num_kv_heads;
            attend_group(isa, k, v, layout, batch, dims, token, kv_head, q, o);
        });
}

multiversion!(fn attend_group<W: Elem>(
    k: &[W],
    v: &[W],
    layout: KvLayout,
    batch: &ForwardBatch,
    dims: AttentionDims,
    token: usize,
    kv_head: usize,
    q: &[f32],
    out: &mut [f32],
) = attend);

#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn attend<S: Simd16, W: Elem>(
    k: &[W],
    v: &[W],
    layout: KvLayout,
    batch: &ForwardBatch,
    dims: AttentionDims,
    token: usize,
    kv_head: usize,
    q: &[f32],
    out: &mut [f32],
) {
    let hd = dims.head_dim;
    let bs = dims.block_size;
    let heads = q.len() / hd;
    let seq = &batch.sequences[batch.token_sequence[token]];
    let end = batch.positions[token] + 1;
    let start = dims.sliding_window.map_or(0, |w| end.saturating_sub(w));
    let scale = 1.0 / (hd as f32).sqrt();

    out.fill(0.0);
    let mut running_max = vec![f32::NEG_INFINITY; heads];
    let mut running_sum = vec![0.0f32; heads];
    // Per head, whole vectors of scores; lanes past the block's keys are never read back.
    let padded = bs.div_ceil(LANES) * LANES;
    let mut scores = vec![0.0f32; heads * padded];
    let (kp, vp) = (k.as_ptr(), v.as_ptr());
    for logical in start / bs..=(end - 1) / bs {
        let lo = start.max(logical * bs);
        let hi = end.min((logical + 1) * bs);
        let n = hi - lo;
        let first_slot = seq.block_table[logical] as usize * bs + lo % bs;
        // SAFETY (all pointer arithmetic below): the batch was validated against the cache,
        // so every slot of the block exists; a full vector of keys is only loaded when its
        // 16 keys lie inside the block.
        let keys = kp.add(layout.key(first_slot, kv_head));
        let mut h = 0;
        while h < heads {
            // Up to four heads share each key load, as four independent chains.
            let take = (heads - h).min(4);
            let (qh, sh) = (q.as_ptr().add(h * hd), scores.as_mut_ptr().add(h * padded));
            match take {
                4 => score_heads::<S, W, 4>(qh, keys, hd, bs, padded, n, scale, sh),
                3 => score_heads::<S, W, 3>(qh, keys, hd, bs, padded, n, scale, sh),
                2 => score_heads::<S, W, 2>(qh, keys, hd, bs, padded, n, scale, sh),
                _ => score_heads::<S, W, 1>(qh, keys, hd, bs, padded, n, scale, sh),
            }
            h += take;
        }
        let values = vp.add(layout.value(first_slot, kv_head));
        let value_stride = layout.slot_width();
        for h in 0..heads {
            let sh = &mut scores[h * padded..(h + 1) * padded];
            let block_max = sh[..n].iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let new_max = running_max[h].max(block_max);
            let neg_max = S::splat(-new_max);
            for c in (0..n).step_by(LANES) {
                let at = sh.as_mut_ptr().add(c);
                exp(S::add(S::load(at), neg_max)).store(at);
            }
            let correction = (running_max[h] - new_max).exp();
            running_sum[h] *= correction;
            for &p in &sh[..n] {
                running_sum[h] += p;
            }
            let oh = out.as_mut_ptr().add(h * hd);
            let probs = &sh[..n];
            match hd {
                64 => add_values::<S, W, 4>(oh, correction, probs, values, value_stride),
                128 => add_values::<S, W, 8>(oh, correction, probs, values, value_stride),
                _ => {
                    let mut scale = correction;
                    for (i, &p) in probs.iter().enumerate() {
                        scale_add::<S, W>(oh, scale, p, values.add(i * value_stride), hd);
                        scale = 1.0;
                    }
                }
            }
            running_max[h] = new_max;
        }
    }
    for (o, sum) in out.chunks_exact_mut(hd).zip(&running_sum) {
        let inv = 1.0 / sum;
        for v in o.iter_mut() {
            *v *= inv;
        }
    }
}

/// Scores of `H` consecutive query heads against keys `0..n` of a transposed K block:
/// each score one in-order chain of fused multiply-adds over the head dimension, times
/// `scale`. Head `h` writes `out[h * stride..]`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn score_heads<S: Simd16, W: Elem, const H: usize>(
    q: *const f32,
    keys: *const W,
    hd: usize,
    bs: usize,
    stride: usize,
    n: usize,
    scale: f32,
    out: *mut f32,
) {
    let mut j = 0;
    while j + LANES <= n {
        let mut acc = [S::zero(); H];
        for d in 0..hd {
            let kv = W::load::<S>(keys.add(d * bs + j));
            for (h, a) in acc.iter_mut().enumerate() {
                *a = S::fma(S::splat(*q.add(h * hd + d)), kv, *a);
            }
        }
        for (h, a) in acc.iter().enumerate() {
            S::mul(*a, S::splat(scale)).store(out.add(h * stride + j));
        }
        j += LANES;
    }
    for j in j..n {
        for h in 0..H {
            let mut acc = 0.0f32;
            for d in 0..hd {
                acc = (*q.add(h * hd + d)).mul_add((*keys.add(d * bs + j)).to_f32(), acc);
            }
            *out.add(h * stride + j) = acc * scale;
        }
    }
}

/// `out = out * correction + sum_i probs[i] * value_i` for a head of `16 * C` dimensions,
/// the output held in registers for the whole block. The same operations in the same order
/// as `scale_add` key by key (multiplying by 1.0 is exact), so either gives the same bits.
#[inline(always)]
unsafe fn add_values<S: Simd16, W: Elem, const C: usize>(
    out: *mut f32,
    correction: f32,
    probs: &[f32],
    values: *const W,
    stride: usize,
) {
    let corr = S::splat(correction);
    let mut acc: [S; C] = std::array::from_fn(|c| S::mul(S::load(out.add(c * LANES)), corr));
    for (i, &p) in probs.iter().enumerate() {
        let (pv, row) = (S::splat(p), values.add(i * stride));
        for (c, a) in acc.iter_mut().enumerate() {
            *a = S::fma(W::load::<S>(row.add(c * LANES)), pv, *a);
        }
    }
    for (c, a) in acc.iter().enumerate() {
        a.store(out.add(c * LANES));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::LogitsWanted;
    use crate::matrix::{Matrix, WeightDtype};

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

    /// Runs 10 tokens of one sequence (scattered blocks, 2 query heads per KV head) on every
    /// path: each within `tol` of plain softmax attention on the stored K/V, and all paths
    /// bitwise equal.
    fn check(head_dim: usize, block_size: usize, dtype: WeightDtype, tol: f32) {
        let dims = AttentionDims {
            num_heads: 4,
            num_kv_heads: 2,
            head_dim,
            block_size,
            sliding_window: None,
        };
        let width = 2 * head_dim;
        let layout = KvLayout {
            block_size,
            num_kv_heads: 2,
            head_dim,
        };
        let mut kv = LayerKv::new(dtype, 6, layout);
        let table = [5u32, 1, 3];
        // Every block full but the last, which holds 3 tokens.
        let tokens = 2 * block_size + 3;
        let k_new = values(tokens * width, 1);
        let v_new = values(tokens * width, 2);
        let mut batch = ForwardBatch::new(block_size);
        batch
            .push(&vec![0; tokens], 0, &table, LogitsWanted::Last)
            .unwrap();
        kv.write(&batch.slot_mapping, &k_new, &v_new);
        let q_width = 4 * head_dim;
        let q = values(tokens * q_width, 3);
        let mut scalar = vec![0.0; tokens * q_width];
        paged_attention_with(Isa::Scalar, &q, &kv, &batch, dims, &mut scalar);
        for t in 0..tokens {
            for h in 0..4 {
                let g = h / 2;
                let row = |src: &[f32], p: usize| -> Vec<f32> {
                    let r = &src[p * width + g * head_dim..p * width + (g + 1) * head_dim];
                    // What the cache holds: rounded to its dtype.
                    let m = Matrix::from_f32(1, head_dim, r.to_vec(), dtype);
                    let mut out = vec![0.0; head_dim];
                    m.row_to_f32(0, &mut out);
                    out
                };
                let ks: Vec<Vec<f32>> = (0..=t).map(|p| row(&k_new, p)).collect();
                let vs: Vec<Vec<f32>> = (0..=t).map(|p| row(&v_new, p)).collect();
                let at = (t * 4 + h) * head_dim;
                let want = reference(&q[at..at + head_dim], &ks, &vs);
                for d in 0..head_dim {
                    let diff = (scalar[at + d] - want[d]).abs();
                    assert!(
                        diff < tol,
                        "{dtype} hd={head_dim} t={t} h={h} d={d}: {diff}"
                    );
                }
            }
        }
        for isa in Isa::supported() {
            let mut out = vec![0.0; tokens * q_width];
            paged_attention_with(isa, &q, &kv, &batch, dims, &mut out);
            let same = out
                .iter()
                .zip(&scalar)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{isa} differs from scalar ({dtype}, hd={head_dim})");
        }
    }

    #[test]
    fn matches_softmax_attention_with_gqa_and_scattered_blocks() {
        for (head_dim, block_size) in [(8, 4), (16, 16), (24, 16), (64, 32), (64, 20), (128, 16)] {
            for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::BF16] {
                check(head_dim, block_size, dtype, 1e-5);
            }
        }
    }
}
