//! Partitions of a long context: each partition of `PARTITION_TOKENS` keys gets its own
//! online softmax, and the partitions are merged in order. One task walking every partition
//! and one task per partition (split-KV decode: a few long sequences spread over many cores)
//! then give the same bits, since both merge the same partition states the same way.

use super::matmul::OutPtr;
use super::simd::LANES;
use crate::kernels::paged_attention::{fold, AttentionDims};

/// Keys per partition of the context. Each partition gets its own online softmax, and the
/// partitions are then merged in order (`merge_partition`), so a long context can be split
/// over cores (split-KV decode) with the same result as one task walking it all.
pub(super) const PARTITION_TOKENS: usize = 512;

/// Logical blocks per partition (at least one).
pub(super) fn partition_blocks(block_size: usize) -> usize {
    (PARTITION_TOKENS / block_size).max(1)
}

/// Floats of one (token, KV head group)'s partition state: unnormalised outputs, then each
/// head's running max, then each head's lane sums.
pub(super) fn state_len(heads: usize, head_dim: usize) -> usize {
    heads * (head_dim + 1 + LANES)
}

/// One (token, head group)'s softmax state over some keys, as `state_len` floats.
pub(super) struct State<'a> {
    pub(super) out: &'a mut [f32],
    pub(super) max: &'a mut [f32],
    pub(super) sums: &'a mut [f32],
}

impl<'a> State<'a> {
    pub(super) fn split(buf: &'a mut [f32], heads: usize, hd: usize) -> Self {
        let (out, rest) = buf.split_at_mut(heads * hd);
        let (max, sums) = rest.split_at_mut(heads);
        State {
            out,
            max,
            sums: &mut sums[..heads * LANES],
        }
    }

    /// Copies the state into `dst` in the `state_len` layout.
    pub(super) fn store(&self, dst: &mut [f32]) {
        let (out, rest) = dst.split_at_mut(self.out.len());
        let (max, sums) = rest.split_at_mut(self.max.len());
        out.copy_from_slice(self.out);
        max.copy_from_slice(self.max);
        sums[..self.sums.len()].copy_from_slice(self.sums);
    }

    /// Each head's outputs divided by its softmax denominator, in place.
    pub(super) fn normalize_in_place(&mut self, heads: usize, hd: usize) {
        for h in 0..heads {
            let inv = 1.0 / fold(&self.sums[h * LANES..(h + 1) * LANES]);
            for o in &mut self.out[h * hd..(h + 1) * hd] {
                *o *= inv;
            }
        }
    }

    pub(super) fn empty(buf: &'a mut [f32], heads: usize, hd: usize) -> Self {
        let state = State::split(buf, heads, hd);
        state.out.fill(0.0);
        state.max.fill(f32::NEG_INFINITY);
        state.sums.fill(0.0);
        state
    }
}

/// Folds a later partition's state into the state of the keys before it. Scalar code, so
/// the same operations on every kernel path; merging into an empty state copies exactly
/// (x * 1 + 0 * 0).
pub(super) fn merge_partition(acc: &mut State<'_>, part: &State<'_>, heads: usize, hd: usize) {
    for h in 0..heads {
        let part_max = part.max[h];
        if part_max == f32::NEG_INFINITY {
            continue; // no keys of this partition for this token
        }
        let max = acc.max[h].max(part_max);
        let (keep, add) = ((acc.max[h] - max).exp(), (part_max - max).exp());
        for (a, p) in acc.out[h * hd..(h + 1) * hd]
            .iter_mut()
            .zip(&part.out[h * hd..])
        {
            *a = *a * keep + *p * add;
        }
        let lanes = h * LANES..(h + 1) * LANES;
        for (a, p) in acc.sums[lanes.clone()].iter_mut().zip(&part.sums[lanes]) {
            *a = *a * keep + *p * add;
        }
        acc.max[h] = max;
    }
}

/// Each head's outputs divided by its softmax denominator, into `out` (one group's row).
///
/// # Safety
/// `out` must hold `heads * hd` floats.
pub(super) unsafe fn normalize(state: &State<'_>, heads: usize, hd: usize, out: *mut f32) {
    for h in 0..heads {
        let inv = 1.0 / fold(&state.sums[h * LANES..(h + 1) * LANES]);
        for d in 0..hd {
            *out.add(h * hd + d) = state.out[h * hd + d] * inv;
        }
    }
}

/// Merges the partition states a split tile's tasks left in `states` (partition-major, token
/// by token) in partition order, and writes the tokens' outputs.
///
/// # Safety
/// `out` must be the call's output; no other task writes these tokens' rows of this group.
pub(super) unsafe fn merge_partials(
    dims: AttentionDims,
    t0: usize,
    t1: usize,
    kv_head: usize,
    states: &[f32],
    num_parts: usize,
    out: OutPtr,
) {
    let (hd, heads) = (dims.head_dim, dims.num_heads / dims.num_kv_heads);
    let len = state_len(heads, hd);
    let mut acc_buf = vec![0.0f32; len];
    let mut part_buf = vec![0.0f32; len];
    for ti in 0..t1 - t0 {
        let mut acc = State::empty(&mut acc_buf, heads, hd);
        for p in 0..num_parts {
            let at = (p * (t1 - t0) + ti) * len;
            part_buf.copy_from_slice(&states[at..at + len]);
            let part = State::split(&mut part_buf, heads, hd);
            merge_partition(&mut acc, &part, heads, hd);
        }
        let row = out
            .0
            .add((t0 + ti) * dims.num_heads * hd + kv_head * heads * hd);
        normalize(&acc, heads, hd, row);
    }
}
