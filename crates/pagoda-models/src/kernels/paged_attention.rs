//! Attention of each new token over its sequence's paged KV cache, on all cores.
//!
//! One task per (tile of up to 8 tokens, KV head): the query heads sharing that KV head
//! (grouped-query attention) are scored together, so each cached key and value is read once
//! per group. Scores go block by block with an online softmax (running max and sum,
//! rescaling the partial output), so no score matrix is materialised and no exp overflows;
//! the softmax restarts at each partition of 512 keys and partitions are merged in order
//! (`attention_partitions.rs`), which lets a long context be split over cores. A token at
//! position p sees positions up to p only, which makes attention causal among the new tokens
//! and full over the cached context. Keys are visited in logical block order whatever the
//! physical block numbers, so a token's result is the same whichever way its sequence was
//! chunked or batched, and (the kernels' order being fixed) on every kernel path.

use super::attention_partitions::{
    merge_partials, merge_partition, normalize, partition_blocks, state_len, State,
};
use super::dot::scale_add;
use super::isa::{isa, Isa};
// Shared by tasks that write disjoint rows: here each its own tokens' rows of one KV head group.
use super::matmul::OutPtr;
use super::simd::{exp, multiversion, Elem, Simd16, LANES};
use crate::aligned::AlignedVec;
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
    attention_split(isa, q, kv, batch, dims, out, Split::Auto);
}

/// Whether the partitions of a long context run as tasks of their own. The result is the
/// same bits either way: it only changes how the work is spread over the cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// When a call has too few (token tile, KV head) tasks to keep every core busy.
    Auto,
    #[cfg(test)]
    Never,
    #[cfg(test)]
    Always,
}

fn attention_split(
    isa: Isa,
    q: &[f32],
    kv: &LayerKv,
    batch: &ForwardBatch,
    dims: AttentionDims,
    out: &mut [f32],
    split: Split,
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
        (KvData::F32(k), KvData::F32(v)) => run(
            isa,
            Call {
                k,
                v,
                layout: l,
                batch,
                dims,
            },
            q,
            out,
            split,
        ),
        (KvData::F16(k), KvData::F16(v)) => run(
            isa,
            Call {
                k,
                v,
                layout: l,
                batch,
                dims,
            },
            q,
            out,
            split,
        ),
        (KvData::BF16(k), KvData::BF16(v)) => run(
            isa,
            Call {
                k,
                v,
                layout: l,
                batch,
                dims,
            },
            q,
            out,
            split,
        ),
        _ => unreachable!("K and V are allocated with one dtype"),
    }
}

/// What every task of one call shares: the layer's cache and the batch.
#[derive(Clone, Copy)]
struct Call<'a, W> {
    k: &'a [W],
    v: &'a [W],
    layout: KvLayout,
    batch: &'a ForwardBatch,
    dims: AttentionDims,
}

/// Query tokens per task: consecutive tokens of one sequence share each widened K/V block
/// (a prefill chunk reads and widens its context once per tile, not once per token).
const TILE_TOKENS: usize = 8;

/// One task: KV head `kv_head` of tokens `t0..t1` over partitions `parts`; `partial` is
/// where it leaves its one partition's state, or `None` to finish the outputs itself.
#[derive(Clone, Copy)]
struct Task {
    t0: usize,
    t1: usize,
    kv_head: usize,
    parts: (usize, usize),
    partial: Option<usize>,
}

fn run<W: Elem>(isa: Isa, call: Call<'_, W>, q: &[f32], out: &mut [f32], split: Split) {
    let batch = call.batch;
    let dims = call.dims;
    let mut tiles = Vec::new();
    let mut t = 0;
    while t < batch.num_tokens() {
        let seq = batch.token_sequence[t];
        let mut end = t + 1;
        while end < batch.num_tokens() && end - t < TILE_TOKENS && batch.token_sequence[end] == seq
        {
            end += 1;
        }
        tiles.push((t, end));
        t = end;
    }
    let kv_heads = dims.num_kv_heads;
    let pb = partition_blocks(dims.block_size);
    let parts = |(t0, t1): (usize, usize)| {
        let (first, last) = block_range(call, t0, t1);
        (first / pb, last / pb + 1)
    };
    let split = match split {
        Split::Auto => tiles.len() * kv_heads < super::num_threads(),
        #[cfg(test)]
        Split::Never => false,
        #[cfg(test)]
        Split::Always => true,
    };
    let heads = dims.num_heads / kv_heads;
    let state = state_len(heads, dims.head_dim);
    let mut tasks = Vec::with_capacity(tiles.len() * kv_heads);
    // (tile, KV head, first partition state, partitions) of the tiles that were split.
    let mut merges = Vec::new();
    let mut scratch_len = 0;
    for &(t0, t1) in &tiles {
        let (p0, p1) = parts((t0, t1));
        for kv_head in 0..kv_heads {
            if !split || p1 - p0 == 1 {
                let parts = (p0, p1);
                tasks.push(Task {
                    t0,
                    t1,
                    kv_head,
                    parts,
                    partial: None,
                });
                continue;
            }
            merges.push(((t0, t1), kv_head, scratch_len, p1 - p0));
            for p in p0..p1 {
                let partial = Some(scratch_len);
                tasks.push(Task {
                    t0,
                    t1,
                    kv_head,
                    parts: (p, p + 1),
                    partial,
                });
                scratch_len += (t1 - t0) * state;
            }
        }
    }
    let mut scratch = vec![0.0f32; scratch_len];
    let out = OutPtr(out.as_mut_ptr());
    let scratch_ptr = OutPtr(scratch.as_mut_ptr());
    super::pool::for_each(tasks.len(), |t| {
        attend_tile(isa, call, tasks[t], q, out, scratch_ptr)
    });
    super::pool::for_each(merges.len(), |m| {
        let ((t0, t1), kv_head, at, num_parts) = merges[m];
        // SAFETY: the partial states were written above; each merge writes its own rows.
        unsafe { merge_partials(dims, t0, t1, kv_head, &scratch[at..], num_parts, out) }
    });
}

/// The first and last logical blocks any token of `t0..t1` reads.
fn block_range<W>(call: Call<'_, W>, t0: usize, t1: usize) -> (usize, usize) {
    let (batch, dims) = (call.batch, call.dims);
    let bs = dims.block_size;
    let span = |t: usize| span(batch, dims, t);
    let first = (t0..t1).map(|t| span(t).0 / bs).min().unwrap_or(0);
    let last = (t0..t1).map(|t| (span(t).1 - 1) / bs).max().unwrap_or(0);
    (first, last)
}

/// The keys token `t` sees: `[start, end)` positions of its sequence.
fn span(batch: &ForwardBatch, dims: AttentionDims, t: usize) -> (usize, usize) {
    let end = batch.positions[t] + 1;
    (
        dims.sliding_window.map_or(0, |w| end.saturating_sub(w)),
        end,
    )
}

multiversion!(fn attend_tile<W: Elem>(
    call: Call<'_, W>,
    task: Task,
    q: &[f32],
    out: OutPtr,
    scratch: OutPtr,
) = attend);

/// Tokens `t0..t1` (one sequence) against KV head `kv_head`, for the query heads of its
/// group, over the task's partitions of the context. Each (token, head) runs its own online
/// softmax over its own keys of a partition in logical block order, exactly as it would
/// alone (the tile only shares the loads), and the partitions are merged in order.
#[inline(always)]
unsafe fn attend<S: Simd16, W: Elem>(
    call: Call<'_, W>,
    task: Task,
    q: &[f32],
    out: OutPtr,
    scratch: OutPtr,
) {
    let Task {
        t0,
        t1,
        kv_head,
        parts,
        partial,
    } = task;
    let Call {
        k,
        v,
        layout,
        batch,
        dims,
    } = call;
    let hd = dims.head_dim;
    let bs = dims.block_size;
    let heads = dims.num_heads / dims.num_kv_heads;
    let group_len = heads * hd;
    let row_len = dims.num_heads * hd;
    let tokens = t1 - t0;
    let seq = &batch.sequences[batch.token_sequence[t0]];
    let span = |t: usize| span(batch, dims, t);
    let scale = 1.0 / (hd as f32).sqrt();

    let rows: Vec<*mut f32> = (t0..t1)
        .map(|t| out.0.add(t * row_len + kv_head * group_len))
        .collect();
    // One partition that ends the work: the partition's outputs go straight to the output
    // rows. Otherwise they go to `part_out`, and are merged into `acc` partition by partition
    // (or left in `scratch` for a split task's merge).
    let direct = partial.is_none() && parts.1 - parts.0 == 1;
    let mut part_out = AlignedVec::<f32>::zeroed(if direct { 0 } else { tokens * group_len });
    let outs: Vec<*mut f32> = if direct {
        rows.clone()
    } else {
        (0..tokens)
            .map(|ti| part_out.as_mut_ptr().add(ti * group_len))
            .collect()
    };
    let state = state_len(heads, hd);
    let mut acc = vec![
        0.0f32;
        if direct || partial.is_some() {
            0
        } else {
            tokens * state
        }
    ];
    for ti in 0..acc.len() / state.max(1) {
        State::empty(&mut acc[ti * state..(ti + 1) * state], heads, hd);
    }
    let mut running_max = vec![f32::NEG_INFINITY; tokens * heads];
    // Softmax denominators, lane by lane (folded once at the end): a serial sum over the keys
    // would cost an add's latency per key.
    let mut sums = AlignedVec::<f32>::zeroed(tokens * heads * LANES);
    let mut correction = vec![0.0f32; heads];
    // Per head, whole vectors of scores; lanes past the block's keys are never read back.
    let padded = bs.div_ceil(LANES) * LANES;
    let mut scores = AlignedVec::<f32>::zeroed(heads * padded);
    let wide = S::REGISTERS >= 32;
    let mut tile_scores = AlignedVec::<f32>::zeroed(if wide { tokens * heads * padded } else { 0 });
    // A 16-bit block is widened once here (exactly) and read by every token and head. These
    // start on cache lines, so no whole-vector load of them splits one.
    let mut keys_f32 = AlignedVec::<f32>::zeroed(if W::IS_F32 { 0 } else { hd * bs });
    let mut values_f32 = AlignedVec::<f32>::zeroed(if W::IS_F32 { 0 } else { bs * hd });
    let (kp, vp) = (k.as_ptr(), v.as_ptr());
    let (first_block, last_block) = block_range(call, t0, t1);
    let pb = partition_blocks(bs);
    for part in parts.0..parts.1 {
        for &o in &outs {
            std::ptr::write_bytes(o, 0, group_len);
        }
        running_max.fill(f32::NEG_INFINITY);
        sums.fill(0.0);
        for logical in first_block.max(part * pb)..=last_block.min((part + 1) * pb - 1) {
            let block_start = seq.block_table[logical] as usize * bs;
            // The slots of this block any token of the tile reads.
            let used_end = (t0..t1)
                .map(|t| {
                    span(t)
                        .1
                        .min((logical + 1) * bs)
                        .saturating_sub(logical * bs)
                })
                .max()
                .unwrap_or(0);
            // SAFETY (all pointer arithmetic below): the batch was validated against the cache,
            // so every slot of the block exists; a full vector of keys is only loaded when its
            // 16 keys lie inside the block.
            let block_keys = kp.add(layout.key(block_start, kv_head));
            let block_values = vp.add(layout.value(block_start, kv_head));
            let (keys, values, value_stride) = if W::IS_F32 {
                (
                    block_keys as *const f32,
                    block_values as *const f32,
                    layout.slot_width(),
                )
            } else {
                widen::<S, W>(block_keys, hd * bs, keys_f32.as_mut_ptr());
                for i in 0..used_end {
                    let row = block_values.add(i * layout.slot_width());
                    widen::<S, W>(row, hd, values_f32.as_mut_ptr().add(i * hd));
                }
                (keys_f32.as_ptr(), values_f32.as_ptr(), hd)
            };
            // The tokens that see this block: (index in the tile, first key, keys seen).
            let mut active = [(0usize, 0usize, 0usize); TILE_TOKENS];
            let mut num_active = 0;
            for (ti, t) in (t0..t1).enumerate() {
                let (start, end) = span(t);
                if logical < start / bs || logical > (end - 1) / bs {
                    continue;
                }
                let lo = start.max(logical * bs);
                let hi = end.min((logical + 1) * bs);
                active[num_active] = (ti, lo - logical * bs, hi - lo);
                num_active += 1;
            }
            let active = &active[..num_active];
            // Scored together when every token sees the block from its first key and the block
            // is whole vectors: each K load then feeds several tokens' chains. Each score is the
            // same in-order chain as alone.
            let joint = wide && bs % LANES == 0 && active.iter().all(|a| a.1 == 0);
            if joint {
                let most = active.iter().map(|a| a.2).max().unwrap_or(0);
                for group in active.chunks(4) {
                    let mut qs = [std::ptr::null::<f32>(); 4];
                    let mut outs_s = [std::ptr::null_mut::<f32>(); 4];
                    for (g, &(ti, _, _)) in group.iter().enumerate() {
                        qs[g] = q.as_ptr().add((t0 + ti) * row_len + kv_head * group_len);
                        outs_s[g] = tile_scores.as_mut_ptr().add(ti * heads * padded);
                    }
                    score_tile::<S>(
                        group.len(),
                        &qs,
                        &outs_s,
                        keys,
                        hd,
                        bs,
                        padded,
                        heads,
                        most,
                        scale,
                    );
                }
            }
            for &(ti, first, n) in active {
                let token = Token {
                    q: q.as_ptr().add((t0 + ti) * row_len + kv_head * group_len),
                    out: outs[ti],
                    running_max: running_max.as_mut_ptr().add(ti * heads),
                    sums: sums.as_mut_ptr().add(ti * heads * LANES),
                };
                let keys = Keys {
                    keys: keys.add(first),
                    values: values.add(first * value_stride),
                    value_stride,
                    n,
                    room: bs - first,
                };
                let scores: &mut [f32] = if joint {
                    &mut tile_scores[ti * heads * padded..(ti + 1) * heads * padded]
                } else {
                    &mut scores
                };
                block_step::<S>(
                    token,
                    keys,
                    dims,
                    heads,
                    padded,
                    scale,
                    joint,
                    scores,
                    &mut correction,
                );
            }
        }
        // The partition's state per token: (outputs, maxima, lane sums) in `state_len` layout.
        for ti in 0..tokens {
            let mut part = State {
                out: std::slice::from_raw_parts_mut(outs[ti], group_len),
                max: &mut running_max[ti * heads..(ti + 1) * heads],
                sums: &mut sums[ti * heads * LANES..(ti + 1) * heads * LANES],
            };
            if direct {
                part.normalize_in_place(heads, hd);
            } else if let Some(at) = partial {
                let dst = std::slice::from_raw_parts_mut(scratch.0.add(at + ti * state), state);
                part.store(dst);
            } else {
                let mut a = State::split(&mut acc[ti * state..(ti + 1) * state], heads, hd);
                merge_partition(&mut a, &part, heads, hd);
            }
        }
    }
    if !direct && partial.is_none() {
        for (ti, &row) in rows.iter().enumerate() {
            let a = State::split(&mut acc[ti * state..(ti + 1) * state], heads, hd);
            normalize(&a, heads, hd, row);
        }
    }
}

/// One token's query rows, output rows and softmax state (for the heads of one group).
#[derive(Clone, Copy)]
struct Token {
    q: *const f32,
    out: *mut f32,
    running_max: *mut f32,
    sums: *mut f32,
}

/// The keys and values one token sees in one block (already widened to f32).
#[derive(Clone, Copy)]
struct Keys {
    keys: *const f32,
    values: *const f32,
    value_stride: usize,
    n: usize,
    /// Keys from `keys` to the end of the block's row.
    room: usize,
}

/// One token's online-softmax step over one block: scores (unless `scored`: already in
/// `scores`), the running max and sums, the outputs rescaled and the weighted values added.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn block_step<S: Simd16>(
    token: Token,
    keys: Keys,
    dims: AttentionDims,
    heads: usize,
    padded: usize,
    scale: f32,
    scored: bool,
    scores: &mut [f32],
    correction: &mut [f32],
) {
    let hd = dims.head_dim;
    let bs = dims.block_size;
    let Keys {
        keys,
        values,
        value_stride,
        n,
        room,
    } = keys;
    let (q, out) = (token.q, token.out);
    let mut h = if scored { heads } else { 0 };
    while h < heads {
        // Up to four heads share each key load, as four independent chains.
        let take = (heads - h).min(4);
        let (qh, sh) = (q.add(h * hd), scores.as_mut_ptr().add(h * padded));
        match take {
            4 => score_heads::<S, 4>(qh, keys, hd, bs, padded, n, room, scale, sh),
            3 => score_heads::<S, 3>(qh, keys, hd, bs, padded, n, room, scale, sh),
            2 => score_heads::<S, 2>(qh, keys, hd, bs, padded, n, room, scale, sh),
            _ => score_heads::<S, 1>(qh, keys, hd, bs, padded, n, room, scale, sh),
        }
        h += take;
    }
    let chunks = n.div_ceil(LANES) * LANES;
    for (h, corr) in correction.iter_mut().enumerate().take(heads) {
        let sh = scores.as_mut_ptr().add(h * padded);
        // Lanes past the keys take no part: -inf for the max, then 0 for the sums.
        for l in n..chunks {
            *sh.add(l) = f32::NEG_INFINITY;
        }
        let mut max = S::splat(f32::NEG_INFINITY);
        for c in (0..chunks).step_by(LANES) {
            max = S::max(S::load(sh.add(c)), max);
        }
        let block_max = horizontal_max(max);
        let running = &mut *token.running_max.add(h);
        let new_max = running.max(block_max);
        let neg_max = S::splat(-new_max);
        for c in (0..chunks).step_by(LANES) {
            exp(S::add(S::load(sh.add(c)), neg_max)).store(sh.add(c));
        }
        for l in n..chunks {
            *sh.add(l) = 0.0;
        }
        *corr = (*running - new_max).exp();
        let sp = token.sums.add(h * LANES);
        let mut sum = S::mul(S::load(sp), S::splat(*corr));
        for c in (0..chunks).step_by(LANES) {
            sum = S::add(sum, S::load(sh.add(c)));
        }
        sum.store(sp);
        *running = new_max;
    }
    let wide = S::REGISTERS >= 32;
    let mut h = 0;
    while h < heads {
        let (oh, ph) = (out.add(h * hd), scores.as_ptr().add(h * padded));
        let corr = correction.as_ptr().add(h);
        let step = match (hd, wide, heads - h) {
            (64, true, left) if left >= 4 => {
                add_values::<S, 4, 4>(oh, corr, ph, padded, n, values, value_stride, hd);
                4
            }
            (64, true, left) if left >= 2 => {
                add_values::<S, 2, 4>(oh, corr, ph, padded, n, values, value_stride, hd);
                2
            }
            (64, _, _) => {
                add_values::<S, 1, 4>(oh, corr, ph, padded, n, values, value_stride, hd);
                1
            }
            (128, true, left) if left >= 2 => {
                add_values::<S, 2, 8>(oh, corr, ph, padded, n, values, value_stride, hd);
                2
            }
            (128, _, _) => {
                add_values::<S, 1, 8>(oh, corr, ph, padded, n, values, value_stride, hd);
                1
            }
            _ => {
                let mut scale = correction[h];
                for i in 0..n {
                    let row = values.add(i * value_stride);
                    scale_add::<S, f32>(oh, scale, *ph.add(i), row, hd);
                    scale = 1.0;
                }
                1
            }
        };
        h += step;
    }
}

/// The largest lane (exact whatever the order).
#[inline(always)]
unsafe fn horizontal_max<S: Simd16>(v: S) -> f32 {
    let mut lanes = [0.0f32; LANES];
    v.store(lanes.as_mut_ptr());
    lanes.iter().copied().fold(f32::NEG_INFINITY, f32::max)
}

/// Sixteen lanes summed in a fixed tree (lane `l` with `l + 8`, then pairs).
pub(super) fn fold(lanes: &[f32]) -> f32 {
    let h: [f32; 8] = std::array::from_fn(|l| lanes[l] + lanes[l + 8]);
    ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]))
}

/// Widens `len` elements to f32 (exactly).
#[inline(always)]
unsafe fn widen<S: Simd16, W: Elem>(src: *const W, len: usize, dst: *mut f32) {
    let body = len / LANES * LANES;
    for i in (0..body).step_by(LANES) {
        W::load::<S>(src.add(i)).store(dst.add(i));
    }
    for i in body..len {
        *dst.add(i) = (*src.add(i)).to_f32();
    }
}

/// Scores of every head of `count` (1-4) tokens against the first `n` keys of a transposed
/// K block (whole vectors, rounded up), token `g` reading `qs[g]` and writing
/// `outs[g][h * stride..]`, in register tiles of up to 4 tokens x 4 heads.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn score_tile<S: Simd16>(
    count: usize,
    qs: &[*const f32; 4],
    outs: &[*mut f32; 4],
    keys: *const f32,
    hd: usize,
    bs: usize,
    stride: usize,
    heads: usize,
    n: usize,
    scale: f32,
) {
    let mut h = 0;
    while h < heads {
        let take = (heads - h).min(4);
        macro_rules! go {
            ($T:literal, $H:literal) => {
                score_tokens::<S, $T, $H>(qs, outs, h, keys, hd, bs, stride, n, scale)
            };
        }
        match (count, take) {
            (4, 4) => go!(4, 4),
            (4, 3) => go!(4, 3),
            (4, 2) => go!(4, 2),
            (4, _) => go!(4, 1),
            (3, 4) => go!(3, 4),
            (3, 3) => go!(3, 3),
            (3, 2) => go!(3, 2),
            (3, _) => go!(3, 1),
            (2, 4) => go!(2, 4),
            (2, 3) => go!(2, 3),
            (2, 2) => go!(2, 2),
            (2, _) => go!(2, 1),
            (_, 4) => go!(1, 4),
            (_, 3) => go!(1, 3),
            (_, 2) => go!(1, 2),
            _ => go!(1, 1),
        }
        h += take;
    }
}

/// Heads `h0..h0 + H` of tokens `0..T` (see `score_tile`): one K vector load feeds `T * H`
/// independent chains.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn score_tokens<S: Simd16, const T: usize, const H: usize>(
    qs: &[*const f32; 4],
    outs: &[*mut f32; 4],
    h0: usize,
    keys: *const f32,
    hd: usize,
    bs: usize,
    stride: usize,
    n: usize,
    scale: f32,
) {
    let mut j = 0;
    while j < n {
        let mut acc = [[S::zero(); H]; T];
        for d in 0..hd {
            let kv = S::load(keys.add(d * bs + j));
            for (t, row) in acc.iter_mut().enumerate() {
                let q = qs[t].add(h0 * hd + d);
                for (h, a) in row.iter_mut().enumerate() {
                    *a = S::fma(S::splat(*q.add(h * hd)), kv, *a);
                }
            }
        }
        for (t, row) in acc.iter().enumerate() {
            for (h, a) in row.iter().enumerate() {
                S::mul(*a, S::splat(scale)).store(outs[t].add((h0 + h) * stride + j));
            }
        }
        j += LANES;
    }
}

/// Scores of `H` consecutive query heads against keys `0..n` of a transposed K block (key
/// `j`, dimension `d` at `keys[d * bs + j]`; `room` keys from `keys` to the end of the
/// block's row): each score one in-order chain of fused multiply-adds over the head
/// dimension, times `scale`. Head `h` writes `out[h * stride..]`. A vector of 16 keys is
/// loaded wherever it stays inside the row, even past `n`: those lanes are never read back,
/// and a lane's bits do not depend on whether it was computed in a vector or alone.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn score_heads<S: Simd16, const H: usize>(
    q: *const f32,
    keys: *const f32,
    hd: usize,
    bs: usize,
    stride: usize,
    n: usize,
    room: usize,
    scale: f32,
    out: *mut f32,
) {
    let mut j = 0;
    while j < n && j + LANES <= room {
        let mut acc = [S::zero(); H];
        for d in 0..hd {
            let kv = S::load(keys.add(d * bs + j));
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
                acc = (*q.add(h * hd + d)).mul_add(*keys.add(d * bs + j), acc);
            }
            *out.add(h * stride + j) = acc * scale;
        }
    }
}

/// For `H` consecutive heads of `16 * C` dimensions: `out = out * correction + sum_i
/// probs[i] * value_i`, the outputs held in registers for the whole block and each value
/// load shared by the heads. Per head the same operations in the same order as `scale_add`
/// key by key (multiplying by 1.0 is exact), so either gives the same bits.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn add_values<S: Simd16, const H: usize, const C: usize>(
    out: *mut f32,
    correction: *const f32,
    probs: *const f32,
    probs_stride: usize,
    n: usize,
    values: *const f32,
    value_stride: usize,
    hd: usize,
) {
    // Plain loops, not closures: a closure is compiled without the path's target features.
    let mut acc = [[S::zero(); C]; H];
    for (h, acc) in acc.iter_mut().enumerate() {
        let corr = S::splat(*correction.add(h));
        for (c, a) in acc.iter_mut().enumerate() {
            *a = S::mul(S::load(out.add(h * hd + c * LANES)), corr);
        }
    }
    let mut vs = [S::zero(); C];
    for i in 0..n {
        let row = values.add(i * value_stride);
        for (c, v) in vs.iter_mut().enumerate() {
            *v = S::load(row.add(c * LANES));
        }
        for (h, acc) in acc.iter_mut().enumerate() {
            let pv = S::splat(*probs.add(h * probs_stride + i));
            for (a, v) in acc.iter_mut().zip(&vs) {
                *a = S::fma(*v, pv, *a);
            }
        }
    }
    for (h, acc) in acc.iter().enumerate() {
        for (c, a) in acc.iter().enumerate() {
            a.store(out.add(h * hd + c * LANES));
        }
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
    fn check(head_dim: usize, block_size: usize, window: Option<usize>, dtype: WeightDtype) {
        // Every block full but the last, which holds 3 tokens.
        check_len(head_dim, block_size, window, dtype, 2 * block_size + 3, 1);
    }

    /// `check` over `tokens` tokens, the reference computed for every `stride`-th token.
    fn check_len(
        head_dim: usize,
        block_size: usize,
        window: Option<usize>,
        dtype: WeightDtype,
        tokens: usize,
        stride: usize,
    ) {
        let tol = 1e-5;
        let dims = AttentionDims {
            num_heads: 4,
            num_kv_heads: 2,
            head_dim,
            block_size,
            sliding_window: window,
        };
        let width = 2 * head_dim;
        let layout = KvLayout {
            block_size,
            num_kv_heads: 2,
            head_dim,
        };
        // Blocks scattered over a cache with three more than needed.
        let needed = tokens.div_ceil(block_size);
        let num_blocks = needed + 3;
        let mut kv = LayerKv::new(dtype, num_blocks, layout);
        let table: Vec<u32> = (0..needed)
            .map(|i| ((i * 7 + 5) % num_blocks) as u32)
            .collect();
        assert!(
            !num_blocks.is_multiple_of(7),
            "the table must not repeat a block"
        );
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
        for t in (0..tokens).step_by(stride).chain([tokens - 1]) {
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
                let from = window.map_or(0, |w| (t + 1).saturating_sub(w));
                let ks: Vec<Vec<f32>> = (from..=t).map(|p| row(&k_new, p)).collect();
                let vs: Vec<Vec<f32>> = (from..=t).map(|p| row(&v_new, p)).collect();
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
            // Partitions of a long context as tasks of their own or walked by one: the same.
            for split in [Split::Never, Split::Always] {
                let mut other = vec![0.0; tokens * q_width];
                attention_split(isa, &q, &kv, &batch, dims, &mut other, split);
                let same = other
                    .iter()
                    .zip(&out)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa} {split:?} differs ({dtype}, {tokens} tokens)");
            }
            // Each token alone (as in decode, split over partitions or not) gets the bits it
            // got in its tile.
            for t in (0..tokens).step_by(stride).chain([tokens - 1]) {
                let mut alone = ForwardBatch::new(block_size);
                alone.push(&[0], t, &table, LogitsWanted::Last).unwrap();
                let row = &q[t * q_width..(t + 1) * q_width];
                let want = &out[t * q_width..(t + 1) * q_width];
                for split in [Split::Auto, Split::Never, Split::Always] {
                    let mut got = vec![0.0; q_width];
                    attention_split(isa, row, &kv, &alone, dims, &mut got, split);
                    let same = got
                        .iter()
                        .zip(want)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(
                        same,
                        "{isa} {split:?}: token {t} alone differs from its tile ({dtype})"
                    );
                }
            }
        }
    }

    #[test]
    fn matches_softmax_attention_with_gqa_and_scattered_blocks() {
        for (head_dim, block_size) in [(8, 4), (16, 16), (24, 16), (64, 32), (64, 20), (128, 16)] {
            for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::BF16] {
                check(head_dim, block_size, None, dtype);
            }
        }
        // A window starting inside a block: the first keys of a block are skipped.
        for window in [5, 21, 40] {
            for dtype in [WeightDtype::F32, WeightDtype::F16] {
                check(64, 16, Some(window), dtype);
            }
        }
    }

    #[test]
    fn long_contexts_merge_their_partitions_alike_split_or_not() {
        // 1,100 keys: three partitions of 512 (a window of 600 spans two or three).
        check_len(64, 16, None, WeightDtype::F32, 1100, 131);
        check_len(64, 16, Some(600), WeightDtype::F16, 1100, 131);
        check_len(128, 32, None, WeightDtype::BF16, 1030, 131);
    }
}
