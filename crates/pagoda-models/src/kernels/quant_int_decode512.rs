//! One token's integer products on AVX-512 VNNI (`quant_int.rs`'s decode for batches of
//! one): each `vpdpbusd` multiplies two chunks at once in 512 bits, and a group's 16 chunk
//! totals come out of a tree of in-lane unpacks and adds, the chunks' factors multiplied in
//! once per half super-block (not per quad of chunks). The integers are the exact sums the
//! other tiles take, and the float step is theirs (`group_step`), so the bits are the same.

use std::arch::x86_64::*;

use super::matmul::OutPtr;
use super::quant_int::{
    group_mins, group_scales_into, group_step, QuantizedActs, TokenActs, GROUP,
};
use super::quant_matmul::{Call, Task};
use super::rows_ahead::RowsAhead;
use super::simd::{Avx512, Simd16};
use crate::quant::formats::{Factors, IntFormat};

/// Multiplies rows `task` (`rows` holds exactly them) by the one token of `acts`.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C; `rows` and `acts` are `call`'s.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) unsafe fn one_token<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    let token = acts.token(0);
    let chunks = call.cols / 32;
    let rows_ahead = RowsAhead::new(row_bytes, acts.groups);
    // Byte offsets of a group's chunks from its first.
    let chunk_starts = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(F::BYTES as i32),
    );
    for r in 0..task.num_rows {
        let row = rows.as_ptr().add(r * row_bytes);
        let mut ahead = rows_ahead.start(row);
        let mut acc = Avx512::zero();
        for g in 0..acts.groups {
            ahead = rows_ahead.ask(ahead);
            let present = chunks.saturating_sub(GROUP * g).min(GROUP);
            let mut scale = [0.0f32; GROUP];
            let mut offset = [0.0f32; GROUP];
            let scale = if F::SCALE_F16_FIRST {
                gathered_scales::<F>(row, g, present, chunk_starts)
            } else {
                group_scales_into::<Avx512, F>(
                    row,
                    g,
                    chunks,
                    scale.as_mut_ptr(),
                    offset.as_mut_ptr(),
                );
                Avx512::load(scale.as_ptr())
            };
            let isum = if present == GROUP {
                group_ints::<F, true>(row, g, present, token)
            } else {
                group_ints::<F, false>(row, g, present, token)
            };
            let offset = if F::OFFSET {
                Avx512::load(offset.as_ptr())
            } else {
                Avx512::zero()
            };
            let mins = group_mins::<Avx512, F>(row, g, chunks);
            acc = group_step::<Avx512, F>(acc, isum, scale, offset, mins, token, g);
        }
        *out.0.add(task.col + r) = acc.reduce();
    }
}

/// Group `g`'s scales (`present` chunks, zeros after) of a format whose scale is the f16
/// at each chunk's start: one gather of four bytes at each chunk start (the scale and two
/// bytes of the same chunk), whose low halves are the scales.
#[inline(always)]
unsafe fn gathered_scales<F: IntFormat>(
    row: *const u8,
    g: usize,
    present: usize,
    chunk_starts: __m512i,
) -> Avx512 {
    let lanes = ((1u32 << present) - 1) as __mmask16;
    let first = row.add(GROUP * g * F::BYTES);
    let words = _mm512_mask_i32gather_epi32::<1>(
        _mm512_setzero_si512(),
        lanes,
        chunk_starts,
        first as *const _,
    );
    Avx512(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)))
}

/// The exact totals of group `g`'s chunks (`present` of them, zeros after; all 16 with
/// `FULL`) of the row at `row` with the token, chunk `k` in lane `k`.
#[inline(always)]
unsafe fn group_ints<F: IntFormat, const FULL: bool>(
    row: *const u8,
    g: usize,
    present: usize,
    token: TokenActs,
) -> __m512i {
    let first = GROUP * g;
    let biased = F::SIGNED && F::FACTORS == Factors::One;
    let signed = F::SIGNED && !biased;
    // Macros, not closures: a closure is compiled without the path's target features.
    // Chunk `first + k`'s weights as the unsigned operand, zero past the row.
    macro_rules! weights {
        ($k:expr) => {{
            let k = $k;
            if !FULL && k >= present {
                _mm256_setzero_si256()
            } else if biased {
                F::chunk_biased::<Avx512>(row, first + k)
            } else {
                F::chunk_q::<Avx512>(row, first + k)
            }
        }};
    }
    let x = token.q.add(32 * first);
    // Chunks `2 p` and `2 p + 1`: their activations are one load; lane `l` of each half the
    // total of values `4 l..4 l + 4`, so 128-bit lane 0 of a half holds the chunk's first 16
    // values and lane 1 its last 16.
    macro_rules! pair {
        ($p:literal) => {{
            let w = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(weights!(2 * $p)),
                weights!(2 * $p + 1),
            );
            let x = _mm512_loadu_si512(x.add(64 * $p) as *const _);
            let (w, x) = if signed {
                // No `vpsignb` in 512 bits: the weights' signs move onto the activations by
                // a masked negation.
                let negative = _mm512_movepi8_mask(w);
                (
                    _mm512_abs_epi8(w),
                    _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x),
                )
            } else {
                (w, x)
            };
            _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x)
        }};
    }
    // Pairs (0, 1) and (2, 3), then those and (4, 5) + (6, 7): each 128-bit lane ends with
    // one partial total of each of the four pairs' chunks at that lane.
    let low = lanes_of_four(pair!(0), pair!(1), pair!(2), pair!(3));
    let high = if FULL || present > 8 {
        lanes_of_four(pair!(4), pair!(5), pair!(6), pair!(7))
    } else {
        _mm512_setzero_si512()
    };
    // `low`'s 128-bit lanes: first halves of chunks 0, 2, 4, 6; their second halves; first
    // halves of 1, 3, 5, 7; their second halves. `high` the same for chunks 8-15.
    let (low, high) = if F::FACTORS == Factors::One {
        (low, high)
    } else {
        let high = if FULL || present > 8 {
            times_factors(high, F::half_factors(row, first + 8))
        } else {
            high
        };
        (times_factors(low, F::half_factors(row, first)), high)
    };
    let halves = _mm512_add_epi32(
        _mm512_shuffle_i64x2::<0x88>(low, high),
        _mm512_shuffle_i64x2::<0xDD>(low, high),
    );
    // Lanes now hold chunks 0, 2, 4, 6, 1, 3, 5, 7, 8, 10, ...: back in order.
    let order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    let ints = _mm512_permutexvar_epi32(order, halves);
    if biased {
        // `128 * sum(x)` of each chunk, the share of the weights' bias (zero past the row).
        let sums = _mm512_cvtps_epi32(_mm512_loadu_ps(token.sums.add(first)));
        _mm512_sub_epi32(ints, _mm512_slli_epi32::<7>(sums))
    } else {
        ints
    }
}

/// Four pairs' products (16 lanes each) summed to one vector: 128-bit lane `l` holds, in
/// order, `a`'s, `b`'s, `c`'s and `d`'s lane-`l` totals of four values each summed over their
/// lane.
#[inline(always)]
unsafe fn lanes_of_four(a: __m512i, b: __m512i, c: __m512i, d: __m512i) -> __m512i {
    let ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    let cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd))
}

/// `v` (lanes as `group_ints` leaves them before adding halves) times the factors of eight
/// chunks' halves, `factors[2 c + h]` that of half `h` of chunk `c`.
#[inline(always)]
unsafe fn times_factors(v: __m512i, factors: [i8; 16]) -> __m512i {
    let f = _mm_loadu_si128(factors.as_ptr() as *const __m128i);
    let order = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_mullo_epi32(v, _mm512_cvtepi8_epi32(_mm_shuffle_epi8(f, order)))
}
