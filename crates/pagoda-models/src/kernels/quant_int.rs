//! Integer products for GGUF blocks: activations quantized to 8 bits per token and chunk of
//! 32 (`QuantizedActs`), multiplied by the blocks' small integers in integer registers, each
//! chunk's total scaled once in f32 (what llama.cpp does; several times fewer instructions
//! per weight than widening every weight to f32).
//!
//! The definition, on every path and for any number of tokens: per output, sixteen chains;
//! for each group of 16 chunks, chain `k` takes chunk `c = 16 g + k`'s
//! `fma(scale_c * dx_c, isum_c, acc)` (then, for formats with an offset,
//! `fma(offset_c * dx_c, xsum_c, acc)`), where `isum_c` is the exact integer
//! `sum(f(i) * q[i] * x[i])` over the chunk (`IntFormat`) and `xsum_c` that of its
//! activations (Q2_K, whose offsets are per half chunk: `m_low * sum(x_low) + m_high *
//! sum(x_high)`, `offset_c` its `-dmin`); chunks past the row's end are zero terms; then
//! the fixed tree of
//! `reduce_lanes`. Decode sums each chunk in registers; prefill (`quant_int_prefill.rs`)
//! multiplies rows laid out four bytes per chunk, so one vector holds 16 chunks' sums.
//! Integer sums are exact in any order, so a token's outputs are the same bits alone or
//! batched, on every path.

use super::pool::Chunks;
use crate::aligned::{AlignedVec, Plain};

use super::matmul::OutPtr;
use super::quant_matmul::{Call, Task, DECODE_TOKENS};
use super::quant_prefill::group_size;
use super::simd::{multiversion, prefetch, Simd16};
use super::Isa;
use crate::quant::formats::{Factors, IntFormat};

/// Chunks of 32 values per group: one lane each.
pub(super) const GROUP: usize = 16;
/// Bytes of one token's activations per group.
pub(super) const GROUP_BYTES: usize = 32 * GROUP;

/// Activations as 8-bit integers, per token and group of 16 chunks (zeros past the end):
/// the bytes in order (`q`) and four bytes of each chunk at a time (`wide`: bytes
/// `64 v + 4 k..+ 4` are values `4 v..4 v + 4` of chunk `k`), and per chunk `dx`, the sum
/// of its values, and the sums of values 0-15 and 16-31 as a pair of i16 (`halves`, the
/// lanes of `wide`'s products by pairs, and what Q2_K's mins multiply).
pub struct QuantizedActs {
    q: AlignedVec<i8>,
    /// Empty where no part of the product reads it (every part on the AMX tiles).
    wide: AlignedVec<i8>,
    dx: AlignedVec<f32>,
    sums: AlignedVec<f32>,
    halves: AlignedVec<i32>,
    /// On the AMX path, `q` and `dx` run on to a whole block of 16 tokens (zeros past the
    /// last), so a tile of 16 tokens' rows (`quant_int_amx.rs`) can be loaded from any block.
    padded_for_tiles: bool,
    pub(super) groups: usize,
}

/// The buffers of the last `QuantizedActs` this thread dropped. Every value of a new one is
/// written (padding included), so reusing them skips the zeroing a fresh allocation costs:
/// a prompt's activations are megabytes per product, and the calling thread zeroed them
/// while the kernel threads waited (1.5% of a two-thread Q8_0 prefill).
struct Spare {
    q: AlignedVec<i8>,
    wide: AlignedVec<i8>,
    dx: AlignedVec<f32>,
    sums: AlignedVec<f32>,
    halves: AlignedVec<i32>,
}

/// Buffers larger than this (all four together) are freed, not kept.
const SPARE_BYTES: usize = 64 << 20;

thread_local! {
    static SPARE: std::cell::RefCell<Option<Spare>> = const { std::cell::RefCell::new(None) };
}

/// `buf` holding `len` values, reusing its memory: only growth is zeroed (and then
/// overwritten).
fn sized<T: Plain>(mut buf: AlignedVec<T>, len: usize) -> AlignedVec<T> {
    buf.resize_zeroed(len);
    buf
}

impl Drop for QuantizedActs {
    fn drop(&mut self) {
        let bytes = self.q.capacity()
            + self.wide.capacity()
            + 4 * (self.dx.capacity() + self.sums.capacity() + self.halves.capacity());
        if bytes > SPARE_BYTES {
            return;
        }
        let spare = Spare {
            q: std::mem::take(&mut self.q),
            wide: std::mem::take(&mut self.wide),
            dx: std::mem::take(&mut self.dx),
            sums: std::mem::take(&mut self.sums),
            halves: std::mem::take(&mut self.halves),
        };
        // A thread being torn down has no slot left; the buffers are simply freed.
        let _ = SPARE.try_with(|slot| *slot.borrow_mut() = Some(spare));
    }
}

/// One token's activations.
#[derive(Clone, Copy)]
pub(super) struct TokenActs {
    pub q: *const i8,
    pub wide: *const i8,
    pub dx: *const f32,
    pub sums: *const f32,
    pub halves: *const i32,
}

impl QuantizedActs {
    /// `padded` as a product on `isa` would ask for it, with both layouts.
    #[cfg(test)]
    pub(super) fn new(isa: Isa, x: &[f32], n: usize, cols: usize) -> QuantizedActs {
        QuantizedActs::padded(isa, x, n, cols, QuantizedActs::tiles_for(isa, n), true)
    }

    /// Whether `n` tokens' products run on the AMX tiles (where their format allows).
    pub(super) fn tiles_for(isa: Isa, n: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        return isa == Isa::Avx512Amx && n >= super::quant_int_amx::MIN_TOKENS;
        #[cfg(not(target_arch = "x86_64"))]
        return false;
    }

    /// `x[n, cols]`, `cols` a multiple of 32. Per chunk: `dx = amax / 127`, values
    /// `round_ties_even(x * (127 / amax))` (0 when `amax` is 0); a chunk holding a NaN or an
    /// infinity gets `dx = NaN`, so the outputs it reaches are NaN as in float products.
    /// `q` and `dx` run on to a whole block of 16 tokens where `padded_for_tiles`, and
    /// `wide` is filled only `with_lines` (the vector prefill reads it).
    pub(super) fn padded(
        isa: Isa,
        x: &[f32],
        n: usize,
        cols: usize,
        padded_for_tiles: bool,
        with_lines: bool,
    ) -> QuantizedActs {
        assert!(
            cols.is_multiple_of(32) && x.len() == n * cols,
            "activation shape"
        );
        let groups = (cols / 32).div_ceil(GROUP);
        let padded = if padded_for_tiles {
            n.next_multiple_of(16)
        } else {
            n
        };
        let spare = SPARE.with(|slot| slot.borrow_mut().take());
        let spare = spare.unwrap_or(Spare {
            q: AlignedVec::new(),
            wide: AlignedVec::new(),
            dx: AlignedVec::new(),
            sums: AlignedVec::new(),
            halves: AlignedVec::new(),
        });
        let per_token = GROUP_BYTES * groups;
        let mut acts = QuantizedActs {
            q: sized(spare.q, padded * per_token),
            wide: sized(spare.wide, if with_lines { n * per_token } else { 0 }),
            dx: sized(spare.dx, padded * GROUP * groups),
            sums: sized(spare.sums, n * GROUP * groups),
            halves: sized(spare.halves, n * GROUP * groups),
            padded_for_tiles,
            groups,
        };
        // The block's tokens past the last are zeros (a reused buffer holds old values).
        acts.q[n * per_token..].fill(0);
        acts.dx[n * GROUP * groups..].fill(0.0);
        let q = Chunks::new(&mut acts.q, per_token);
        let wide = Chunks::new(&mut acts.wide, per_token);
        let dx = Chunks::new(&mut acts.dx, GROUP * groups);
        let sums = Chunks::new(&mut acts.sums, GROUP * groups);
        let halves = Chunks::new(&mut acts.halves, GROUP * groups);
        super::pool::for_each(n, |t| {
            let x = &x[t * cols..][..cols];
            let wide: &mut [i8] = if with_lines {
                // SAFETY: task `t` alone takes token `t`'s chunks.
                unsafe { wide.get(t) }
            } else {
                &mut []
            };
            // SAFETY: as above.
            unsafe {
                quantize_token(
                    isa,
                    x,
                    q.get(t),
                    wide,
                    halves.get(t),
                    dx.get(t),
                    sums.get(t),
                )
            }
        });
        acts
    }

    /// Whether `wide` was filled.
    pub(super) fn has_lines(&self) -> bool {
        self.wide.len() == self.sums.len() / GROUP * GROUP_BYTES
    }

    /// Whether `tile_rows` may load 16 tokens from any block (the AMX path's layout).
    #[cfg(target_arch = "x86_64")]
    pub(super) fn has_tiles(&self) -> bool {
        self.padded_for_tiles
    }

    /// Bytes from one token's activations to the next's.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn token_bytes(&self) -> usize {
        GROUP_BYTES * self.groups
    }

    /// Token `first`'s activations and `dx`: a tile's rows start there, `token_bytes` and
    /// `16 groups` floats apart. `first` a multiple of 16 below the token count.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn tile_rows(&self, first: usize) -> (*const i8, *const f32) {
        assert!(self.padded_for_tiles && first.is_multiple_of(16));
        let (bytes, lanes) = (
            first * GROUP_BYTES * self.groups,
            first * GROUP * self.groups,
        );
        assert!(bytes + 16 * GROUP_BYTES * self.groups <= self.q.len());
        (self.q[bytes..].as_ptr(), self.dx[lanes..].as_ptr())
    }

    #[inline(always)]
    pub(super) fn token(&self, t: usize) -> TokenActs {
        let (bytes, lanes) = (t * GROUP_BYTES * self.groups, t * GROUP * self.groups);
        TokenActs {
            q: self.q[bytes..].as_ptr(),
            // Null without lines: only the vector prefill reads it, and it asks for them.
            wide: if self.wide.is_empty() {
                std::ptr::null()
            } else {
                self.wide[bytes..].as_ptr()
            },
            dx: self.dx[lanes..].as_ptr(),
            sums: self.sums[lanes..].as_ptr(),
            halves: self.halves[lanes..].as_ptr(),
        }
    }
}

// Compiled for each path (a closure run by the pool would get none of the CPU's vector
// features): the chunk loop vectorizes, and the `wide` copy is the tiles' transpose.
multiversion!(fn quantize_token<>(
    x: &[f32], q: &mut [i8], wide: &mut [i8], halves: &mut [i32], dx: &mut [f32],
    sums: &mut [f32]
) = quantize_token_on);

/// One token's `x` into its `q`, `wide` (unless empty), `halves`, `dx` and `sums` (all
/// of its groups, the chunks past `x`'s end zeros).
#[inline(always)]
unsafe fn quantize_token_on<S: Simd16>(
    x: &[f32],
    q: &mut [i8],
    wide: &mut [i8],
    halves: &mut [i32],
    dx: &mut [f32],
    sums: &mut [f32],
) {
    for (c, (xs, qs)) in x.chunks_exact(32).zip(q.chunks_exact_mut(32)).enumerate() {
        (dx[c], sums[c]) = quantize_chunk(xs.try_into().unwrap(), qs.try_into().unwrap());
    }
    let chunks = x.len() / 32;
    q[x.len()..].fill(0);
    dx[chunks..].fill(0.0);
    sums[chunks..].fill(0.0);
    for (chunks, lines) in q
        .chunks_exact(GROUP_BYTES)
        .zip(wide.chunks_exact_mut(GROUP_BYTES))
    {
        // SAFETY: `GROUP_BYTES` bytes are 16 arrays of 32; i8 and u8 share a layout.
        let chunks = &*(chunks.as_ptr() as *const [[u8; 32]; GROUP]);
        S::chunks_to_lines(chunks, lines.as_mut_ptr() as *mut u8);
    }
    for (pair, chunk) in halves.iter_mut().zip(q.chunks_exact(32)) {
        let sum = |half: &[i8]| half.iter().map(|&v| i16::from(v)).sum::<i16>() as u16;
        *pair = (u32::from(sum(&chunk[..16])) | (u32::from(sum(&chunk[16..])) << 16)) as i32;
    }
}

/// 2^-64: chunks whose largest magnitude is below it are scaled up before quantizing.
const TINY: f32 = f32::from_bits((127 - 64) << 23);

/// One chunk of 32 into `q`; returns `dx` and the sum of the values.
#[inline(always)]
fn quantize_chunk(x: &[f32; 32], q: &mut [i8; 32]) -> (f32, f32) {
    // Magnitudes' bits order as integers as the magnitudes do, and every pattern from
    // infinity's up is an infinity or a NaN: one integer maximum (which vectorizes, where
    // a float one with an early exit does not) gives `amax` and finds those.
    let amax_bits = x.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
    if amax_bits >= f32::INFINITY.to_bits() {
        q.fill(0);
        return (f32::NAN, 0.0);
    }
    let amax = f32::from_bits(amax_bits);
    if amax == 0.0 {
        q.fill(0);
        return (0.0, 0.0);
    }
    // Below 2^-64, `127 / amax` can overflow: such a chunk is scaled up by 2^64 first
    // (exact, so its values are those of the same chunk at any scale).
    let scale = if amax < TINY { 1.0 / TINY } else { 1.0 };
    let inverse = 127.0 / (amax * scale);
    // Adding 1.5 * 2^23 rounds to the nearest integer, ties to even, and leaves it in the
    // low bits, for |v| < 2^22 (here |v| <= 127 and a rounding error, so no clamp): integer
    // operations only from there, which vectorize (a float-to-i8 cast does not).
    const ROUND: f32 = 12_582_912.0;
    for (o, v) in q.iter_mut().zip(x) {
        let rounded = ((v * scale) * inverse) + ROUND;
        *o = (rounded.to_bits() as i32 - ROUND.to_bits() as i32) as i8;
    }
    let sum: i32 = q.iter().map(|&v| i32::from(v)).sum();
    (amax / 127.0, sum as f32)
}

multiversion!(fn int_task<F: IntFormat>(
    rows: &[u8], row_bytes: usize, call: Call, acts: &QuantizedActs, task: Task, out: OutPtr
) = sweep_without_dot);

#[inline(always)]
unsafe fn sweep_without_dot<S: Simd16, F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    sweep::<S, F, false>(rows, row_bytes, call, acts, task, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn decode_avx512_vnni<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    sweep::<super::simd::Avx512, F, true>(rows, row_bytes, call, acts, task, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn decode_avx2_vnni<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    sweep::<super::simd::Avx2, F, true>(rows, row_bytes, call, acts, task, out)
}

/// Decode on `isa`, the `-vnni` paths with `vpdpbusd`.
fn decode_task<F: IntFormat>(
    isa: Isa,
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    let isa = isa.without_amx();
    // SAFETY: each path is only chosen on CPUs that have its features (`Isa`).
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match isa {
            Isa::Avx512Vnni if call.n == 1 => {
                return super::quant_int_decode512::one_token::<F>(
                    rows, row_bytes, call, acts, task, out,
                )
            }
            Isa::Avx2 if matches!(call.n, 1..=3) => {
                use super::quant_int_decode256::tokens;
                return match call.n {
                    1 => tokens::<F, 1>(rows, row_bytes, call, acts, task, out),
                    2 => tokens::<F, 2>(rows, row_bytes, call, acts, task, out),
                    _ => tokens::<F, 3>(rows, row_bytes, call, acts, task, out),
                };
            }
            Isa::Avx512Vnni => {
                return decode_avx512_vnni::<F>(rows, row_bytes, call, acts, task, out)
            }
            Isa::Avx2Vnni => return decode_avx2_vnni::<F>(rows, row_bytes, call, acts, task, out),
            _ => {}
        }
    }
    if isa == Isa::Scalar
        && super::quant_int_prefill::SCALAR_DOT.load(std::sync::atomic::Ordering::Relaxed)
    {
        // SAFETY: as in `int_task`; the scalar path has every operation.
        return unsafe {
            sweep::<super::simd::Scalar, F, true>(rows, row_bytes, call, acts, task, out)
        };
    }
    int_task::<F>(isa, rows, row_bytes, call, acts, task, out)
}

/// Multiplies rows `task` of one part (`rows` holds exactly them) by every token.
pub(super) fn int_rows_task<F: IntFormat>(
    isa: Isa,
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    assert!(
        rows.len() == task.num_rows * row_bytes
            && acts.sums.len() == call.n * GROUP * acts.groups
            && acts.q.len() >= call.n * GROUP_BYTES * acts.groups
    );
    assert_eq!(
        acts.groups,
        (call.cols / 32).div_ceil(GROUP),
        "activations of another width"
    );
    if call.n > DECODE_TOKENS {
        super::quant_int_prefill::int_prefill_task::<F>(isa, rows, row_bytes, call, acts, task, out)
    } else {
        decode_task::<F>(isa, rows, row_bytes, call, acts, task, out)
    }
}

/// Token tiles outermost (a tile's activations stay in L1 while the task's rows pass; the
/// rows, at most 64, stay in L2).
#[inline(always)]
unsafe fn sweep<S: Simd16, F: IntFormat, const DOT: bool>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    let (max_r, max_t) = match (S::REGISTERS >= 32, call.n) {
        (true, 1) => (8, 1),
        (true, _) => (4, 3),
        (false, 1) => (4, 1),
        (false, _) => (1, 3),
    };
    let mut t = 0;
    while t < call.n {
        let tt = (call.n - t).min(max_t);
        let mut r = 0;
        while r < task.num_rows {
            let rr = group_size(task.num_rows - r, max_r);
            let tile = Tile {
                rows: rows.as_ptr().add(r * row_bytes),
                row_bytes,
                col: task.col + r,
            };
            macro_rules! go {
                ($R:literal, $T:literal) => {{
                    debug_assert_eq!((rr, tt), ($R, $T));
                    tile_kernel::<S, F, DOT, $R, $T>(tile, call, acts, t, out)
                }};
            }
            // Only the shapes above are written out, each a whole copy of the tile: the
            // `const` condition keeps the other path's shapes from being compiled at all.
            if const { S::REGISTERS >= 32 } {
                match (rr, tt) {
                    (8, _) => go!(8, 1),
                    (4, 3) => go!(4, 3),
                    (4, 2) => go!(4, 2),
                    (4, _) => go!(4, 1),
                    (2, 3) => go!(2, 3),
                    (2, 2) => go!(2, 2),
                    (2, _) => go!(2, 1),
                    (_, 3) => go!(1, 3),
                    (_, 2) => go!(1, 2),
                    _ => go!(1, 1),
                }
            } else {
                match (rr, tt) {
                    (4, _) => go!(4, 1),
                    (2, _) => go!(2, 1),
                    (_, 3) => go!(1, 3),
                    (_, 2) => go!(1, 2),
                    _ => go!(1, 1),
                }
            }
            r += rr;
        }
        t += tt;
    }
}

#[derive(Clone, Copy)]
struct Tile {
    rows: *const u8,
    row_bytes: usize,
    col: usize,
}

#[inline(always)]
unsafe fn tile_kernel<S: Simd16, F: IntFormat, const DOT: bool, const R: usize, const T: usize>(
    tile: Tile,
    call: Call,
    acts: &QuantizedActs,
    t: usize,
    out: OutPtr,
) {
    let mut acc = [[S::zero(); R]; T];
    let chunks = call.cols / 32;
    let tokens: [TokenActs; T] = std::array::from_fn(|j| acts.token(t + j));
    // The next tile's rows are asked for a little at each quad of chunks (all at once they
    // fill the line-fill buffers and stall the loads).
    let tile_bytes = R * tile.row_bytes;
    let ahead_step = tile_bytes
        .div_ceil(acts.groups * R * 4)
        .next_multiple_of(64);
    let mut ahead = tile.rows.wrapping_add(tile_bytes);
    for g in 0..acts.groups {
        // Every row's scales first: a vector load right after the scalar stores that wrote
        // it would wait for them to reach the cache.
        let mut scales = [[0.0f32; GROUP]; R];
        let mut offsets = [[0.0f32; GROUP]; R];
        for i in 0..R {
            let row = tile.rows.add(i * tile.row_bytes);
            let (scale, offset) = (scales[i].as_mut_ptr(), offsets[i].as_mut_ptr());
            group_scales_into::<S, F>(row, g, chunks, scale, offset);
        }
        for i in 0..R {
            let row = tile.rows.add(i * tile.row_bytes);
            let scale = S::load(scales[i].as_ptr());
            let offset = if F::OFFSET {
                S::load(offsets[i].as_ptr())
            } else {
                S::zero()
            };
            let mins = group_mins::<S, F>(row, g, chunks);
            // Spelled out, not a loop: indexed quads went through the stack, and a 256-bit
            // load of two 128-bit stores stalls.
            macro_rules! quad_at {
                ($q:literal) => {{
                    let mut line = 0;
                    while line < ahead_step {
                        prefetch(ahead.wrapping_add(line));
                        line += 64;
                    }
                    ahead = ahead.wrapping_add(ahead_step);
                    let first = GROUP * g + 4 * $q;
                    // Only a row's last quad can be short: one copy for it, the count at run
                    // time (a copy per count made the crate's build several times longer).
                    match chunks.saturating_sub(first) {
                        0 => [S::quad_zero(); T],
                        n @ 1..=3 => quad::<S, F, DOT, T, false>(row, first, n, &tokens),
                        _ => quad::<S, F, DOT, T, true>(row, first, 4, &tokens),
                    }
                }};
            }
            let quads = [quad_at!(0), quad_at!(1), quad_at!(2), quad_at!(3)];
            for (j, (row_acc, &token)) in acc.iter_mut().zip(&tokens).enumerate() {
                let isum = S::ints_from_quads([quads[0][j], quads[1][j], quads[2][j], quads[3][j]]);
                row_acc[i] = group_step::<S, F>(row_acc[i], isum, scale, offset, mins, token, g);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            *out.0.add((t + j) * call.stride + tile.col + i) = a.reduce();
        }
    }
}

/// The totals of chunks `first..first + n` (`n <= 4`, 4 when `FULL`; zeros after) of the row
/// at `row`, per token; with `DOT` by `vpdpbusd`, the factors applied to the totals of half
/// chunks.
#[inline(always)]
unsafe fn quad<S: Simd16, F: IntFormat, const DOT: bool, const T: usize, const FULL: bool>(
    row: *const u8,
    first: usize,
    n: usize,
    tokens: &[TokenActs; T],
) -> [S::Quad; T] {
    let n = if FULL { 4 } else { n };
    // Loops, not closures: a closure is compiled without the path's target features.
    let mut w = [S::prep(S::bytes_zero(), F::SIGNED); 4];
    if DOT {
        // Signed weights without factors go in as `q + 128`, unsigned: no signs to move onto
        // the activations, and `128 * sum(x)` taken off the totals after (exact integers).
        let biased = F::SIGNED && F::FACTORS == Factors::One;
        let scaled = F::FACTORS != Factors::One;
        let mut factors = [[1i16; 2]; 4];
        for k in 0..n {
            w[k] = if biased {
                S::prep(F::chunk_biased::<S>(row, first + k), false)
            } else {
                S::prep(F::chunk_q::<S>(row, first + k), F::SIGNED)
            };
            if scaled {
                factors[k] = F::factors(row, first + k);
            }
        }
        let signed = F::SIGNED && !biased;
        let mut sums = [S::quad_zero(); T];
        for (sum, token) in sums.iter_mut().zip(tokens) {
            *sum = S::quad_dots_vnni(w, factors, token.q.add(32 * first), signed, scaled);
            if biased {
                // Past the row's end both the weights and the sums are zero.
                *sum = S::quad_unbias(*sum, token.sums.add(first));
            }
        }
        return sums;
    }
    let mut factors = [S::int_halves(1, 1); 4];
    for k in 0..n {
        w[k] = S::prep(F::chunk_q::<S>(row, first + k), F::SIGNED);
        let [lo, hi] = F::factors(row, first + k);
        factors[k] = S::int_halves(lo, hi);
    }
    let mut sums = [S::quad_zero(); T];
    for (sum, token) in sums.iter_mut().zip(tokens) {
        *sum = S::quad_dots(w, factors, token.q.add(32 * first), F::SIGNED);
    }
    sums
}

/// Group `g`'s scales and, for formats with an offset, offsets of the row at `row` (zeros
/// past its `chunks`), to 16 floats at `scale` and at `offset`.
#[inline(always)]
pub(super) unsafe fn group_scales_into<S: Simd16, F: IntFormat>(
    row: *const u8,
    g: usize,
    chunks: usize,
    scale: *mut f32,
    offset: *mut f32,
) {
    let count = chunks.saturating_sub(GROUP * g).min(GROUP);
    F::scales_into::<S>(row, GROUP * g, count, scale, offset);
    for k in count..GROUP {
        *scale.add(k) = 0.0;
        if F::OFFSET {
            *offset.add(k) = 0.0;
        }
    }
}

/// How many vectors of 16-bit pair sums of a format's stored bytes (`IntFormat::STORED_BIAS`,
/// below `2 * STORED_BIAS`) by activations (at most 127 in magnitude) may add before they
/// widen: Q4_0 8, Q5_0 4, Q6_K 2.
pub(super) const fn stored_span<F: IntFormat>() -> usize {
    let most = 2 * 127 * (2 * F::STORED_BIAS as usize - 1);
    let span = 32767 / most;
    // The sums take one factor as they widen: with factors per half chunk, at most the four
    // vectors of one half (Q3_K's three bits would allow eight).
    let limit = if matches!(F::FACTORS, Factors::PerHalf) {
        4
    } else {
        8
    };
    if span > limit {
        limit
    } else {
        span
    }
}

/// One output's chains after group `g` of one token: the definition's step, shared by the
/// decode and the prefill tiles.
///
/// `mins`: with `IntFormat::HALF_MINS`, the group's mins as i16 pairs per chunk
/// (`group_mins`); unread otherwise.
#[inline(always)]
pub(super) unsafe fn group_step<S: Simd16, F: IntFormat>(
    acc: S,
    isum: S::Ints,
    scale: S,
    offset: S,
    mins: S::Wide,
    x: TokenActs,
    g: usize,
) -> S {
    let dx = S::load(x.dx.add(GROUP * g));
    let acc = S::fma(S::mul(scale, dx), S::ints_f32(isum), acc);
    if !F::OFFSET {
        return acc;
    }
    let xsum = if F::HALF_MINS {
        // Exact: at most 2 * 15 * 16 * 127 in magnitude.
        let halves = S::wide_load(x.halves.add(GROUP * g) as *const u8);
        S::ints_f32(S::wide_widen(S::ints_zero(), halves, mins))
    } else {
        S::load(x.sums.add(GROUP * g))
    };
    S::fma(S::mul(offset, dx), xsum, acc)
}

/// Group `g`'s mins of a `HALF_MINS` format as `group_step` takes them: chunk `k`'s halves'
/// as the i16 pair in bytes `4 k..4 k + 4`, zeros past the row's `chunks` (whole
/// super-blocks of 8 chunks).
#[inline(always)]
pub(super) unsafe fn group_mins<S: Simd16, F: IntFormat>(
    row: *const u8,
    g: usize,
    chunks: usize,
) -> S::Wide {
    if !F::HALF_MINS {
        return S::wide_zero();
    }
    let mut pairs = [0i16; 2 * GROUP];
    for (block, pairs) in pairs.chunks_exact_mut(16).enumerate() {
        let first = GROUP * g + 8 * block;
        if first < chunks {
            let mins = F::half_mins(row, first);
            for (p, &m) in pairs.iter_mut().zip(&mins) {
                *p = i16::from(m);
            }
        }
    }
    S::wide_load(pairs.as_ptr() as *const u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of `acts`, bit for bit.
    type Contents = (Vec<i8>, Vec<i8>, Vec<u32>, Vec<u32>, Vec<i32>);

    fn contents(acts: &QuantizedActs) -> Contents {
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect();
        (
            acts.q.to_vec(),
            acts.wide.to_vec(),
            bits(&acts.dx),
            bits(&acts.sums),
            acts.halves.to_vec(),
        )
    }

    #[test]
    fn reused_buffers_hold_what_fresh_ones_do() {
        // A wide product of many tokens leaves its (nonzero) buffers to this thread; a
        // narrower one of fewer tokens then runs in them, padding and padded tokens included.
        let wide_x: Vec<f32> = (0..40 * 640).map(|i| (i % 97) as f32 - 40.0).collect();
        let x: Vec<f32> = (0..5 * 96).map(|i| ((i * 31) % 53) as f32 - 26.0).collect();
        for (tiles, lines) in [(true, true), (true, false), (false, true)] {
            let fresh = std::thread::spawn({
                let x = x.clone();
                move || contents(&QuantizedActs::padded(Isa::Scalar, &x, 5, 96, tiles, lines))
            })
            .join()
            .unwrap();
            drop(QuantizedActs::padded(
                Isa::Scalar,
                &wide_x,
                40,
                640,
                true,
                true,
            ));
            let reused = QuantizedActs::padded(Isa::Scalar, &x, 5, 96, tiles, lines);
            assert_eq!(contents(&reused), fresh, "tiles {tiles} lines {lines}");
            assert_eq!(reused.has_lines(), lines);
            // Three chunks of a 16-chunk group, 16 tokens where padded for the tiles.
            let tokens = if tiles { 16 } else { 5 };
            assert_eq!(reused.q.len(), tokens * GROUP_BYTES);
            assert!(reused.q[96..GROUP_BYTES].iter().all(|&v| v == 0));
            assert!(reused.q[5 * GROUP_BYTES..].iter().all(|&v| v == 0));
        }
    }

    #[test]
    fn activations_without_lines_are_the_same_bytes() {
        let x: Vec<f32> = (0..17 * 640)
            .map(|i| ((i * 13) % 211) as f32 - 105.0)
            .collect();
        let with = QuantizedActs::padded(Isa::Scalar, &x, 17, 640, true, true);
        let without = QuantizedActs::padded(Isa::Scalar, &x, 17, 640, true, false);
        let (q, wide, dx, sums, halves) = contents(&without);
        assert!(wide.is_empty() && !halves.is_empty());
        assert!(!without.has_lines() && with.has_lines());
        assert_eq!((q, dx, sums, halves), {
            let (q, _, dx, sums, halves) = contents(&with);
            (q, dx, sums, halves)
        });
        assert!(without.token(3).wide.is_null());
    }

    #[test]
    fn activations_quantize_per_chunk_with_ties_to_even_and_nan_kept() {
        let mut x = vec![0.0f32; 96];
        // Chunk 0: amax 127 so values are themselves; 2.5 and -3.5 are ties.
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        x[3] = -127.0;
        x[5] = 9.0;
        x[20] = -5.0;
        // Chunk 1 all zero; chunk 2 holds a NaN.
        x[64] = 1.0;
        x[65] = f32::NAN;
        let acts = QuantizedActs::new(Isa::Scalar, &x, 1, 96);
        assert_eq!(acts.groups, 1);
        assert_eq!(&acts.q[..6], &[127, 2, -4, -127, 0, 9]);
        assert_eq!(acts.dx[0], 1.0);
        assert_eq!(acts.sums[0], (127 + 2 - 4 - 127 + 9 - 5) as f32);
        // Four bytes of each chunk at a time: values 4-7 of chunk 0 follow all 16 chunks'
        // first four.
        assert_eq!(&acts.wide[..4], &[127, 2, -4, -127]);
        assert_eq!(&acts.wide[64..68], &[0, 9, 0, 0]);
        // Values 0-15 and 16-31 of chunk 0 sum to 7 and -5 (the pair's high i16); chunk 3
        // (past the row) to 0.
        assert_eq!(acts.halves[0], 7 | (-5i32 << 16));
        assert_eq!(acts.halves[3], 0);
        assert!(acts.q[32..64].iter().all(|&q| q == 0) && acts.dx[1] == 0.0);
        assert!(acts.dx[2].is_nan());
        // The group's chunks past the row are zero.
        assert!(acts.q[96..].iter().all(|&q| q == 0) && acts.dx[3..].iter().all(|&d| d == 0.0));
    }

    #[test]
    fn every_path_quantizes_activations_to_the_same_bytes() {
        // Three tokens of 20 chunks (a full group and a partial one): ties, zeros, tiny and
        // huge magnitudes, a NaN, infinities and negative zeros.
        let cols = 20 * 32;
        let mut x: Vec<f32> = (0..3 * cols)
            .map(|i| ((i * 7919 + 13) % 2001) as f32 / 8.0 - 125.0)
            .collect();
        x[32..64].fill(0.0);
        x[64..96].fill(-0.0);
        x[100] = f32::NAN;
        x[cols + 200] = f32::INFINITY;
        x[2 * cols + 300] = f32::NEG_INFINITY;
        // Chunk 12 of token 2 is chunk 7 of token 0 times 2^-130 (exact, some of it
        // subnormal; `127 / amax` would overflow): the same values.
        let tiny: Vec<f32> = x[224..256].iter().map(|v| v * 2f32.powi(-130)).collect();
        x[2 * cols + 384..2 * cols + 416].copy_from_slice(&tiny);
        x[2 * cols + 500] = 3.0e38;
        let reference = QuantizedActs::new(Isa::Scalar, &x, 3, cols);
        for c in 0..3 * 20 {
            let (t, k) = (c / 20, c % 20);
            let at = t * 2 * GROUP_BYTES + 32 * k;
            let chunk = &reference.q[at..at + 32];
            for (i, &v) in chunk.iter().enumerate() {
                let (line, lane) = (i / 4, GROUP_BYTES * (at / GROUP_BYTES) + 4 * (k % GROUP));
                assert_eq!(
                    reference.wide[lane + 64 * line + i % 4],
                    v,
                    "chunk {c} value {i}"
                );
            }
        }
        let at = 2 * 2 * GROUP_BYTES + 32 * 12;
        assert_eq!(&reference.q[at..at + 32], &reference.q[224..256]);
        assert!(reference.q[224..256].iter().any(|&v| v.abs() == 127));
        for isa in Isa::supported() {
            let acts = QuantizedActs::new(isa, &x, 3, cols);
            assert_eq!(acts.q, reference.q, "{isa}");
            assert_eq!(acts.wide, reference.wide, "{isa}");
            assert_eq!(acts.halves, reference.halves, "{isa}");
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&acts.dx), bits(&reference.dx), "{isa}");
            assert_eq!(bits(&acts.sums), bits(&reference.sums), "{isa}");
        }
        // Per token `dx` has 32 lanes (two groups); the chunks holding a NaN or an infinity.
        let poisoned = [3, 32 + 6, 2 * 32 + 9];
        for (lane, dx) in reference.dx.iter().enumerate() {
            assert_eq!(dx.is_nan(), poisoned.contains(&lane), "lane {lane}");
        }
    }

    #[test]
    fn quantized_values_stay_within_127() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 7919) % 1000) as f32 / 3.3 - 150.0)
            .collect();
        let acts = QuantizedActs::new(Isa::Scalar, &x, 2, 32);
        assert!(acts.q.iter().all(|&q| (-127..=127).contains(&q)));
        assert!(acts.q.contains(&127) || acts.q.contains(&-127));
    }
}
