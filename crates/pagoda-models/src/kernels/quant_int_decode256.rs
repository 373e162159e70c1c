//! Decode's integer products on AVX2 without an int8 dot product (`quant_int.rs`'s decode,
//! one to three tokens). `vpmaddubsw` and `vpmaddwd` leave eight partial totals per
//! chunk; instead of horizontal adds per quad of chunks, eight chunks' partials meet in a
//! tree of in-lane unpacks and adds (the 16-bit pair sums of two chunks added before they
//! widen where they cannot overflow), which ends with the chunks in order, first halves in
//! the low 128 bits and second halves in the high, where the factors multiply them. The
//! integers are the exact sums the other paths take and the float step is theirs
//! (`group_step`), so the bits are the same.

use std::arch::x86_64::*;

use super::matmul::OutPtr;
use super::quant_int::{group_scales_into, group_step, QuantizedActs, TokenActs, GROUP};
use super::quant_matmul::{Call, Task};
use super::rows_ahead::RowsAhead;
use super::simd::{Avx2, Simd16};
use crate::quant::formats::{Factors, IntFormat};

/// Multiplies rows `task` (`rows` holds exactly them) by the `T` tokens of `acts`, each
/// row's weights decoded once for all of them.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `rows` and `acts` are `call`'s, and `call.n == T`.
#[target_feature(enable = "avx2,fma,f16c")]
#[allow(clippy::needless_range_loop)] // on purpose, see the first comment
pub(super) unsafe fn tokens<F: IntFormat, const T: usize>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    assert_eq!(call.n, T);
    // Index loops over `T` here and below: with `array::from_fn` and iterator chains the one
    // token instance ran 3-10% slower than a kernel written for one token.
    let mut tokens = [acts.token(0); T];
    for j in 1..T {
        tokens[j] = acts.token(j);
    }
    let chunks = call.cols / 32;
    let rows_ahead = RowsAhead::new(row_bytes, acts.groups);
    // Byte offsets of eight chunks from the first.
    let chunk_starts = _mm256_mullo_epi32(
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        _mm256_set1_epi32(F::BYTES as i32),
    );
    for r in 0..task.num_rows {
        let row = rows.as_ptr().add(r * row_bytes);
        let mut ahead = rows_ahead.start(row);
        let mut acc = [Avx2::zero(); T];
        for g in 0..acts.groups {
            ahead = rows_ahead.ask(ahead);
            let first = GROUP * g;
            let present = chunks.saturating_sub(first).min(GROUP);
            let mut scale = [0.0f32; GROUP];
            let mut offset = [0.0f32; GROUP];
            let scale = if F::SCALE_F16_FIRST {
                gathered_scales::<F>(row, g, present, chunk_starts)
            } else {
                group_scales_into::<Avx2, F>(
                    row,
                    g,
                    chunks,
                    scale.as_mut_ptr(),
                    offset.as_mut_ptr(),
                );
                Avx2::load(scale.as_ptr())
            };
            let low = if present >= 8 {
                eight_ints::<F, T, true>(row, first, 8, &tokens)
            } else {
                eight_ints::<F, T, false>(row, first, present, &tokens)
            };
            let high = if present == GROUP {
                eight_ints::<F, T, true>(row, first + 8, 8, &tokens)
            } else if present > 8 {
                eight_ints::<F, T, false>(row, first + 8, present - 8, &tokens)
            } else {
                [_mm256_setzero_si256(); T]
            };
            let offset = if F::OFFSET {
                Avx2::load(offset.as_ptr())
            } else {
                Avx2::zero()
            };
            for j in 0..T {
                let ints = [low[j], high[j]];
                acc[j] = group_step::<Avx2, F>(acc[j], ints, scale, offset, tokens[j], g);
            }
        }
        for j in 0..T {
            *out.0.add(j * call.stride + task.col + r) = acc[j].reduce();
        }
    }
}

/// Group `g`'s scales (`present` chunks, zeros after) of a format whose scale is the f16
/// at each chunk's start, as `quant_int_decode512.rs` gathers them, in two gathers of eight.
#[inline(always)]
unsafe fn gathered_scales<F: IntFormat>(
    row: *const u8,
    g: usize,
    present: usize,
    chunk_starts: __m256i,
) -> Avx2 {
    let first = row.add(GROUP * g * F::BYTES);
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let low_halves = _mm256_set1_epi32(0xFFFF);
    macro_rules! eight {
        ($h:literal) => {{
            let wanted = _mm256_cmpgt_epi32(_mm256_set1_epi32(present as i32 - 8 * $h), lane);
            let words = _mm256_mask_i32gather_epi32::<1>(
                _mm256_setzero_si256(),
                first.add(8 * $h * F::BYTES) as *const _,
                chunk_starts,
                wanted,
            );
            _mm256_and_si256(words, low_halves)
        }};
    }
    // 128-bit lanes [0-3 of the first eight, 0-3 of the second | 4-7, 4-7], then in order.
    let packed = _mm256_packus_epi32(eight!(0), eight!(1));
    let ordered = _mm256_permute4x64_epi64::<0b11_01_10_00>(packed);
    Avx2(
        _mm256_cvtph_ps(_mm256_castsi256_si128(ordered)),
        _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(ordered)),
    )
}

/// The exact totals of chunks `first..first + present` (`present <= 8`, all 8 with `FULL`;
/// zeros after) of the row at `row` with each token, chunk `first + k` in lane `k`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // as in `tokens`
unsafe fn eight_ints<F: IntFormat, const T: usize, const FULL: bool>(
    row: *const u8,
    first: usize,
    present: usize,
    tokens: &[TokenActs; T],
) -> [__m256i; T] {
    let low_biased = F::LOW_BIAS != 0;
    // Macros, not closures: a closure is compiled without the path's target features.
    macro_rules! weights {
        ($k:literal) => {{
            if !FULL && $k >= present {
                _mm256_setzero_si256()
            } else if low_biased {
                F::chunk_low_biased::<Avx2>(row, first + $k)
            } else {
                F::chunk_q::<Avx2>(row, first + $k)
            }
        }};
    }
    // Decoded once for every token.
    let w = [
        weights!(0),
        weights!(1),
        weights!(2),
        weights!(3),
        weights!(4),
        weights!(5),
        weights!(6),
        weights!(7),
    ];
    let factors = if F::FACTORS != Factors::One {
        let f = F::half_factors(row, first);
        let f = _mm_loadu_si128(f.as_ptr() as *const __m128i);
        // `f[2 c + h]` to the lanes' order: halves 0 of chunks 0-3, halves 1, then 4-7's.
        let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
        let f = _mm_shuffle_epi8(f, order);
        [
            _mm256_cvtepi8_epi32(f),
            _mm256_cvtepi8_epi32(_mm_srli_si128::<8>(f)),
        ]
    } else {
        [_mm256_setzero_si256(); 2]
    };
    // One whole tree per token: with loops over `T` inside every step of it, one token ran
    // 5-10% slower than a tree written for one token.
    let mut ints = [_mm256_setzero_si256(); T];
    for j in 0..T {
        ints[j] = token_ints::<F, FULL>(&w, factors, first, present, tokens[j]);
    }
    ints
}

/// One token's totals of the chunks whose weights are `w` (`eight_ints`).
#[inline(always)]
unsafe fn token_ints<F: IntFormat, const FULL: bool>(
    w: &[__m256i; 8],
    factors: [__m256i; 2],
    first: usize,
    present: usize,
    token: TokenActs,
) -> __m256i {
    let low_biased = F::LOW_BIAS != 0;
    let signed = F::SIGNED && !low_biased;
    let x = token.q.add(32 * first);
    // Chunk `first + k`'s 16-bit pair sums: lane `j` of 128-bit lane `h` holds values
    // `16 h + 2 j` and `16 h + 2 j + 1`.
    macro_rules! products {
        ($k:literal) => {{
            if !FULL && $k >= present {
                _mm256_setzero_si256()
            } else {
                let w = w[$k];
                let x = _mm256_loadu_si256(x.add(32 * $k) as *const __m256i);
                if signed {
                    _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w))
                } else {
                    _mm256_maddubs_epi16(w, x)
                }
            }
        }};
    }
    let ones = _mm256_set1_epi16(1);
    // Chunks `a` and `b` as 32-bit lanes `a, b, a, b` per 128-bit lane, each a total of
    // four pair sums of that half.
    macro_rules! two {
        ($a:literal, $b:literal) => {{
            let (a, b) = (products!($a), products!($b));
            if F::SPAN >= 2 {
                // Two pair sums of 16 bits still fit: add them before widening. With a low
                // bias the bytes are below 32, so 2 * 2 * 31 * 127 < 2^15 as well.
                let sum =
                    _mm256_add_epi16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
                _mm256_madd_epi16(sum, ones)
            } else {
                let (a, b) = (_mm256_madd_epi16(a, ones), _mm256_madd_epi16(b, ones));
                _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b))
            }
        }};
    }
    // Chunks 0-3, then 4-7: per 128-bit lane their totals of that half, in order.
    macro_rules! quad {
        ($ab:expr, $cd:expr) => {{
            let (ab, cd) = ($ab, $cd);
            _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd))
        }};
    }
    let mut low = quad!(two!(0, 1), two!(2, 3));
    let mut high = if FULL || present > 4 {
        quad!(two!(4, 5), two!(6, 7))
    } else {
        _mm256_setzero_si256()
    };
    if F::FACTORS != Factors::One {
        low = _mm256_mullo_epi32(low, factors[0]);
        high = _mm256_mullo_epi32(high, factors[1]);
    }
    let ints = _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(low, high),
        _mm256_permute2x128_si256::<0x31>(low, high),
    );
    if low_biased {
        // `LOW_BIAS * sum(x)` of each chunk, the share of the bias (zero past the row).
        let sums = _mm256_cvtps_epi32(_mm256_loadu_ps(token.sums.add(first)));
        let bias = _mm256_set1_epi32(F::LOW_BIAS.into());
        _mm256_sub_epi32(ints, _mm256_mullo_epi32(sums, bias))
    } else {
        ints
    }
}
