//! Decode's integer products on AVX2 without an int8 dot product (`quant_int.rs`'s decode,
//! one to three tokens). `vpmaddubsw` and `vpmaddwd` leave eight partial totals per
//! chunk; instead of horizontal adds per quad of chunks, eight chunks' partials meet in a
//! tree of in-lane unpacks and adds, which ends with the chunks in order. The tree adds in
//! 16 bits as far as the sums cannot overflow (`span16`: four chunks' halves, or all eight
//! chunks whole for 4-bit values) and widens once with `vpmaddwd` by the factors. The
//! integers are the exact sums the other paths take and the float step is theirs
//! (`group_step`), so the bits are the same.

use std::arch::x86_64::*;

use super::matmul::OutPtr;
use super::quant_int::{group_scales_into, group_step, QuantizedActs, TokenActs, GROUP};
use super::quant_matmul::{Call, Task};
use super::rows_ahead::RowsAhead;
use super::simd::{Avx2, Simd16};
use crate::quant::formats::{Factors, IntFormat, SuperBlockFields};

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
    // Each row's chains, summed eight rows at a time (`eight_sums`).
    let mut chains = [[Avx2::zero(); 8]; T];
    for r in 0..task.num_rows {
        let row = rows.as_ptr().add(r * row_bytes);
        let mut ahead = rows_ahead.start(row);
        let mut acc = [Avx2::zero(); T];
        for g in 0..acts.groups {
            ahead = rows_ahead.ask(ahead);
            let first = GROUP * g;
            let present = chunks.saturating_sub(first).min(GROUP);
            // Super-block formats' scales, offsets and factors are built in registers from
            // their fields: through arrays on the stack (`group_scales_into`), Q4_K decoded
            // 23% slower on Zen 3.
            let fields = F::super_block_fields(row.add(2 * g * F::BYTES));
            let zeros = [_mm256_setzero_si256(); 2];
            let (scale, offset, factors) = if let Some(low) = fields {
                // Super-blocks of eight chunks: `present` is 8 or 16.
                let high = if present > 8 {
                    F::super_block_fields(row.add((2 * g + 1) * F::BYTES))
                } else {
                    None
                };
                let (scale, offset) = super_block_scales::<F>(low, high);
                let factors = match (F::FACTORS, high) {
                    (Factors::PerChunk, Some(high)) => [
                        chunk_factor_lanes(low.scales),
                        chunk_factor_lanes(high.scales),
                    ],
                    (Factors::PerChunk, None) => [chunk_factor_lanes(low.scales), zeros],
                    (_, Some(_)) => [
                        half_factor_lanes::<F>(row, first),
                        half_factor_lanes::<F>(row, first + 8),
                    ],
                    (_, None) => [half_factor_lanes::<F>(row, first), zeros],
                };
                (scale, offset, factors)
            } else {
                let mut scale = [0.0f32; GROUP];
                let mut offset = [0.0f32; GROUP];
                let scale = if F::SCALE_F16_FIRST {
                    if present == GROUP {
                        f16_scales::<F, true>(row, g, present)
                    } else {
                        f16_scales::<F, false>(row, g, present)
                    }
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
                let offset = if F::OFFSET {
                    Avx2::load(offset.as_ptr())
                } else {
                    Avx2::zero()
                };
                let factors = match F::FACTORS {
                    Factors::One => [zeros; 2],
                    // The IQ types with scales per 16 weights: super-blocks of eight chunks.
                    _ if present > 8 => [
                        half_factor_lanes::<F>(row, first),
                        half_factor_lanes::<F>(row, first + 8),
                    ],
                    _ => [half_factor_lanes::<F>(row, first), zeros],
                };
                (scale, offset, factors)
            };
            let low = if present >= 8 {
                eight_ints::<F, T, true>(row, first, 8, &tokens, factors[0])
            } else {
                eight_ints::<F, T, false>(row, first, present, &tokens, factors[0])
            };
            let high = if present == GROUP {
                eight_ints::<F, T, true>(row, first + 8, 8, &tokens, factors[1])
            } else if present > 8 {
                eight_ints::<F, T, false>(row, first + 8, present - 8, &tokens, factors[1])
            } else {
                [_mm256_setzero_si256(); T]
            };
            let mins = if F::HALF_MINS {
                [
                    half_min_pairs::<F>(row, first),
                    if present > 8 {
                        half_min_pairs::<F>(row, first + 8)
                    } else {
                        _mm256_setzero_si256()
                    },
                ]
            } else {
                zeros
            };
            for j in 0..T {
                let ints = [low[j], high[j]];
                acc[j] = group_step::<Avx2, F>(acc[j], ints, scale, offset, mins, tokens[j], g);
            }
        }
        let slot = r % 8;
        for j in 0..T {
            chains[j][slot] = acc[j];
        }
        if slot == 7 {
            for j in 0..T {
                let sums = eight_sums(&chains[j]);
                _mm256_storeu_ps(out.0.add(j * call.stride + task.col + r - 7), sums);
            }
        }
    }
    for r in task.num_rows - task.num_rows % 8..task.num_rows {
        for j in 0..T {
            *out.0.add(j * call.stride + task.col + r) = chains[j][r % 8].reduce();
        }
    }
}

/// Eight rows' outputs, row `i` in lane `i`, each the sum of its chains by `Avx2::reduce`'s
/// tree (lanes `l` and `l + 8`, then `l + 4`, `l + 2`, `l + 1`: the same adds, operands in
/// the same order), done for eight rows at once by vertical adds. One row at a time, the
/// tree's dependent adds at the end of each row stalled the next row's chunks (8% of the
/// Q5_0 kernel's samples on Zen 3).
#[inline(always)]
unsafe fn eight_sums(chains: &[Avx2; 8]) -> __m256 {
    let s: [__m256; 8] = [
        _mm256_add_ps(chains[0].0, chains[0].1),
        _mm256_add_ps(chains[1].0, chains[1].1),
        _mm256_add_ps(chains[2].0, chains[2].1),
        _mm256_add_ps(chains[3].0, chains[3].1),
        _mm256_add_ps(chains[4].0, chains[4].1),
        _mm256_add_ps(chains[5].0, chains[5].1),
        _mm256_add_ps(chains[6].0, chains[6].1),
        _mm256_add_ps(chains[7].0, chains[7].1),
    ];
    // Rows `i` (low 128 bits) and `i + 4` (high): lanes 0-3 plus 4-7.
    macro_rules! fours {
        ($i:literal) => {{
            let (a, b) = (s[$i], s[$i + 4]);
            _mm256_add_ps(
                _mm256_permute2f128_ps::<0x20>(a, b),
                _mm256_permute2f128_ps::<0x31>(a, b),
            )
        }};
    }
    let (f0, f1, f2, f3) = (fours!(0), fours!(1), fours!(2), fours!(3));
    // Rows `i`, `i + 1` (and `i + 4`, `i + 5` above): lanes 0, 1 plus 2, 3.
    let t01 = _mm256_add_ps(
        _mm256_shuffle_ps::<0x44>(f0, f1),
        _mm256_shuffle_ps::<0xEE>(f0, f1),
    );
    let t23 = _mm256_add_ps(
        _mm256_shuffle_ps::<0x44>(f2, f3),
        _mm256_shuffle_ps::<0xEE>(f2, f3),
    );
    // Lane 0 plus lane 1 of each: rows 0-3 below, 4-7 above.
    _mm256_add_ps(
        _mm256_shuffle_ps::<0x88>(t01, t23),
        _mm256_shuffle_ps::<0xDD>(t01, t23),
    )
}

/// Chunks `first..first + 8`'s factors in the lanes' order of `token_ints`: halves 0 of
/// chunks 0-3, halves 1 of chunks 0-3, then the same of chunks 4-7.
#[inline(always)]
unsafe fn half_factor_lanes<F: IntFormat>(row: *const u8, first: usize) -> [__m256i; 2] {
    let f = F::half_factors(row, first);
    let f = _mm_loadu_si128(f.as_ptr() as *const __m128i);
    // `f[2 c + h]` to the lanes' order.
    let order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
    let f = _mm_shuffle_epi8(f, order);
    [
        _mm256_cvtepi8_epi32(f),
        _mm256_cvtepi8_epi32(_mm_srli_si128::<8>(f)),
    ]
}

/// Chunks `first..first + 8`'s mins as `group_step` takes them (`quant_int::group_mins`):
/// the halves' pairs of i16, in registers.
#[inline(always)]
unsafe fn half_min_pairs<F: IntFormat>(row: *const u8, first: usize) -> __m256i {
    let m = F::half_mins(row, first);
    _mm256_cvtepu8_epi16(_mm_loadu_si128(m.as_ptr() as *const __m128i))
}

/// A group's scales and offsets from its one or two super-blocks' fields, built in
/// registers: `d` (times `D_FRACTION`) in each block's eight lanes and `-(dmin * m)`
/// (negated by its sign bit, as the scalar `-` does); zeros past the row, as
/// `group_scales_into` leaves them.
#[inline(always)]
unsafe fn super_block_scales<F: IntFormat>(
    low: SuperBlockFields,
    high: Option<SuperBlockFields>,
) -> (Avx2, Avx2) {
    let high_fields = high.unwrap_or_default();
    // `d` and `dmin` of both blocks in one conversion: lanes 0, 1 and 2, 3.
    let bits = u64::from(low.d)
        | u64::from(high_fields.d) << 16
        | u64::from(low.dmin) << 32
        | u64::from(high_fields.dmin) << 48;
    let dd = _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64));
    let dd = if F::D_FRACTION == 1.0 {
        dd
    } else {
        _mm_mul_ps(dd, _mm_set1_ps(F::D_FRACTION))
    };
    let scale = Avx2(
        _mm256_broadcastss_ps(dd),
        _mm256_broadcastss_ps(_mm_shuffle_ps::<0b01>(dd, dd)),
    );
    if !F::OFFSET {
        return (scale, Avx2::zero());
    }
    // Macros, not closures: a closure is compiled without the path's target features.
    macro_rules! offsets {
        ($mins:expr, $dmin_lane:literal) => {{
            let m = _mm_cvtsi64_si128($mins as i64);
            let m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m));
            let dmin = _mm256_broadcastss_ps(_mm_shuffle_ps::<$dmin_lane>(dd, dd));
            _mm256_xor_ps(_mm256_mul_ps(dmin, m), _mm256_set1_ps(-0.0))
        }};
    }
    let offset_high = if high.is_some() {
        offsets!(high_fields.mins, 0b11)
    } else {
        _mm256_setzero_ps()
    };
    (scale, Avx2(offsets!(low.mins, 0b10), offset_high))
}

/// Q4_K/Q5_K's factors of eight chunks from their `sc` bytes, in the lanes' order of
/// `half_factor_lanes`: each chunk's one factor for both its halves.
#[inline(always)]
unsafe fn chunk_factor_lanes(sc: u64) -> [__m256i; 2] {
    let sc = _mm_cvtsi64_si128(sc as i64);
    [
        _mm256_broadcastsi128_si256(_mm_cvtepu8_epi32(sc)),
        _mm256_broadcastsi128_si256(_mm_cvtepu8_epi32(_mm_srli_si128::<4>(sc))),
    ]
}

/// Group `g`'s scales (`present` chunks, zeros after) of a format whose scale is the f16
/// at each chunk's start. Read by scalar loads and packed four to a 64-bit word in general
/// registers: on Zen 3 the two eight-lane `vpgatherdd` this replaced are microcoded and took
/// 15% of the Q5_0 kernel's samples, and the vector pipes are what the chunks' products wait
/// on, while the integer ones are free.
#[inline(always)]
unsafe fn f16_scales<F: IntFormat, const FULL: bool>(
    row: *const u8,
    g: usize,
    present: usize,
) -> Avx2 {
    let first = row.add(GROUP * g * F::BYTES);
    let word = |k: usize| -> u64 {
        if FULL || k < present {
            std::ptr::read_unaligned(first.add(k * F::BYTES) as *const u16) as u64
        } else {
            0
        }
    };
    let four =
        |k: usize| (word(k) | word(k + 1) << 16 | word(k + 2) << 32 | word(k + 3) << 48) as i64;
    Avx2(
        _mm256_cvtph_ps(_mm_set_epi64x(four(4), four(0))),
        _mm256_cvtph_ps(_mm_set_epi64x(four(12), four(8))),
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
    factors: [__m256i; 2],
) -> [__m256i; T] {
    let low_biased = F::LOW_BIAS != 0;
    let signed = F::SIGNED && !low_biased;
    // Macros, not closures: a closure is compiled without the path's target features.
    // Each chunk as the unsigned operand of `vpmaddubsw` and, when signed, the signs.
    macro_rules! weights {
        ($k:literal) => {{
            if !FULL && $k >= present {
                (_mm256_setzero_si256(), _mm256_setzero_si256())
            } else if low_biased {
                let w = F::chunk_stored::<Avx2>(row, first + $k);
                (w, w)
            } else if signed {
                F::chunk_abs_signs::<Avx2>(row, first + $k)
            } else {
                let w = F::chunk_q::<Avx2>(row, first + $k);
                (w, w)
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
    let pairs = if F::FACTORS == Factors::One {
        let ones = _mm256_set1_epi16(1);
        FactorPairs {
            low: ones,
            high: ones,
            whole: ones,
        }
    } else {
        // Each 32-bit lane's factor in both its 16-bit halves.
        let twice = _mm256_setr_epi8(
            0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9,
            12, 13, 12, 13,
        );
        FactorPairs {
            low: _mm256_shuffle_epi8(factors[0], twice),
            high: _mm256_shuffle_epi8(factors[1], twice),
            whole: _mm256_shuffle_epi8(
                _mm256_permute2x128_si256::<0x20>(factors[0], factors[1]),
                twice,
            ),
        }
    };
    // One whole tree per token: with loops over `T` inside every step of it, one token ran
    // 5-10% slower than a tree written for one token.
    let mut ints = [_mm256_setzero_si256(); T];
    for j in 0..T {
        ints[j] = token_ints::<F, FULL>(&w, pairs, first, present, tokens[j]);
    }
    ints
}

/// The factors of `eight_ints`' chunks as 16-bit pairs for `vpmaddwd`: each 32-bit lane's
/// factor in both halves, in the lanes' order of `low` and `high` (halves apart) and of
/// `whole` (chunks 0-7, halves added); ones without factors.
#[derive(Clone, Copy)]
struct FactorPairs {
    low: __m256i,
    high: __m256i,
    whole: __m256i,
}

/// How many vectors of 16-bit pair sums may add before they widen: a low bias leaves the
/// stored bytes, whatever `SPAN` says of the signed values.
const fn span16<F: IntFormat>() -> usize {
    if F::LOW_BIAS == 0 {
        F::SPAN
    } else {
        super::quant_int::stored_span::<F>()
    }
}

/// One token's totals of the chunks whose weights are `w` (`eight_ints`: each chunk's
/// unsigned operand and, when signed, its signs).
#[inline(always)]
unsafe fn token_ints<F: IntFormat, const FULL: bool>(
    w: &[(__m256i, __m256i); 8],
    pairs: FactorPairs,
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
                let (w, signs) = w[$k];
                let x = _mm256_loadu_si256(x.add(32 * $k) as *const __m256i);
                if signed {
                    _mm256_maddubs_epi16(w, _mm256_sign_epi8(x, signs))
                } else {
                    _mm256_maddubs_epi16(w, x)
                }
            }
        }};
    }
    let span = span16::<F>();
    let ints = if span >= 4 {
        // Chunks `a` and `b` as 32-bit lanes `a, b, a, b` per 128-bit lane, then chunks 0-3
        // (4-7) as lanes `0, 1, 2, 3`, every lane still two 16-bit sums of that half.
        macro_rules! pair16 {
            ($a:literal, $b:literal) => {{
                let (a, b) = (products!($a), products!($b));
                _mm256_add_epi16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b))
            }};
        }
        macro_rules! quad16 {
            ($ab:expr, $cd:expr) => {{
                let (ab, cd) = ($ab, $cd);
                _mm256_add_epi16(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd))
            }};
        }
        let low = quad16!(pair16!(0, 1), pair16!(2, 3));
        let high = if FULL || present > 4 {
            quad16!(pair16!(4, 5), pair16!(6, 7))
        } else {
            _mm256_setzero_si256()
        };
        if span >= 8 && F::FACTORS != Factors::PerHalf {
            // The halves add in 16 bits too; one widening, by the factors.
            let whole = _mm256_add_epi16(
                _mm256_permute2x128_si256::<0x20>(low, high),
                _mm256_permute2x128_si256::<0x31>(low, high),
            );
            _mm256_madd_epi16(whole, pairs.whole)
        } else {
            let low = _mm256_madd_epi16(low, pairs.low);
            let high = _mm256_madd_epi16(high, pairs.high);
            _mm256_add_epi32(
                _mm256_permute2x128_si256::<0x20>(low, high),
                _mm256_permute2x128_si256::<0x31>(low, high),
            )
        }
    } else {
        // Q8_0 (span 1): every vector widens on its own, by its chunk's factors (IQ2_XS's
        // per half: 128-bit lane `h` of chunk `k`'s vector is its half `h`).
        let ones = _mm256_set1_epi16(1);
        macro_rules! factors {
            ($k:literal) => {{
                if F::FACTORS == Factors::One {
                    ones
                } else {
                    let four = if $k < 4 { pairs.low } else { pairs.high };
                    _mm256_shuffle_epi32::<{ ($k % 4) * 0x55 }>(four)
                }
            }};
        }
        // Chunks `a` and `b` as 32-bit lanes `a, b, a, b` per 128-bit lane, each a total of
        // four pair sums of that half.
        macro_rules! two {
            ($a:literal, $b:literal) => {{
                let a = _mm256_madd_epi16(products!($a), factors!($a));
                let b = _mm256_madd_epi16(products!($b), factors!($b));
                _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b))
            }};
        }
        // Chunks 0-3, then 4-7: per 128-bit lane their totals of that half, in order.
        macro_rules! quad {
            ($ab:expr, $cd:expr) => {{
                let (ab, cd) = ($ab, $cd);
                _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd))
            }};
        }
        let low = quad!(two!(0, 1), two!(2, 3));
        let high = if FULL || present > 4 {
            quad!(two!(4, 5), two!(6, 7))
        } else {
            _mm256_setzero_si256()
        };
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(low, high),
            _mm256_permute2x128_si256::<0x31>(low, high),
        )
    };
    if low_biased {
        // `LOW_BIAS * sum(x)` of each chunk, the share of the bias (zero past the row).
        let sums = _mm256_cvtps_epi32(_mm256_loadu_ps(token.sums.add(first)));
        let bias = _mm256_set1_epi32(F::LOW_BIAS.into());
        _mm256_sub_epi32(ints, _mm256_mullo_epi32(sums, bias))
    } else {
        ints
    }
}
