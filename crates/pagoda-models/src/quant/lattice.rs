//! The IQ1, IQ2 and IQ3 tensor types: each group of 4 or 8 weights is one row of a fixed
//! codebook (`iq_grids.rs`), chosen by an index of 8 to 11 bits, with a sign bit per weight
//! (IQ2, IQ3) or a shift of one eighth per group (IQ1).
//!
//! Every value is `base * factor * w`: `w` a small signed integer (a codebook magnitude with
//! its sign, or IQ1's `8 g +- 1`), `factor` an odd integer per half chunk (the types with
//! scales per 16 weights) or 1, and `base` the block's `d` times an exact fraction. Each
//! product is exact in f32, so these are bitwise the values the `gguf` package computes
//! (`d * (0.5 + s) * 0.25 * grid * sign`, `d * (2 s + 1) * (grid + delta)`), and the integer
//! kernels multiply `w` as they multiply Q8_0's bytes.

use super::formats::{f16_scalar, Factors, Format, IntFormat, SuperBlockFields};
use super::iq_grids;
use crate::kernels::simd::{RowIndex, Simd16};

/// A chunk's 32 weights `w` (weight `8 l + i` in byte `i` of word `l`) before their signs,
/// and where they are negative.
struct Weights {
    magnitudes: Magnitudes,
    negative: Negative,
}

/// Where a chunk's weights come from.
#[derive(Clone, Copy)]
enum Magnitudes {
    /// Eight rows of four bytes of a codebook, fetched in one gather by the integer kernels.
    Gathered(&'static [u32], RowIndex),
    /// Read in scalar code.
    Words([u64; 4]),
}

impl Magnitudes {
    /// Eight rows of four bytes: gathered where each index is put together from two fields
    /// (IQ3_S); on Zen 3 that is 40% faster than scalar loads there, and slower than them
    /// for indices read whole (IQ3_XXS) and for four 8-byte rows (IQ2: `rows8`).
    #[inline(always)]
    unsafe fn rows4(table: &'static [u32], index: RowIndex) -> Self {
        if index.is_split() {
            Magnitudes::Gathered(table, index)
        } else {
            Magnitudes::Words(four_byte_rows(table, index))
        }
    }

    /// Four rows of eight bytes.
    #[inline(always)]
    unsafe fn rows8(table: &[u64], index: RowIndex) -> Self {
        Magnitudes::Words(std::array::from_fn(|l| table[index.at(l)]))
    }
}

/// Eight four-byte rows in scalar code.
#[inline(always)]
unsafe fn four_byte_rows(table: &[u32], index: RowIndex) -> [u64; 4] {
    std::array::from_fn(|l| two_rows(table, index.at(2 * l), index.at(2 * l + 1)))
}

/// Which of a chunk's weights are negative.
#[derive(Clone, Copy)]
enum Negative {
    /// Weight `i` where bit `i` is set (the types storing a plain bit per weight).
    Bits(u32),
    /// Weight `8 l + i` where bit `i` of `even_signs` of index `l` is set (the signs with a
    /// parity bit, looked up in `EVEN_SIGN_MASKS`).
    Parity(RowIndex),
    /// None: the magnitudes are signed already (IQ1).
    Signed,
}

impl Weights {
    /// The bytes with their signs, in scalar code.
    #[inline(always)]
    unsafe fn signed(&self) -> [u64; 4] {
        let bytes = match self.magnitudes {
            Magnitudes::Gathered(table, index) => four_byte_rows(table, index),
            Magnitudes::Words(words) => words,
        };
        match self.negative {
            Negative::Bits(word) => {
                std::array::from_fn(|l| negated_where(bytes[l], sign_mask((word >> (8 * l)) as u8)))
            }
            Negative::Parity(index) => {
                std::array::from_fn(|l| negated_where(bytes[l], EVEN_SIGN_MASKS[index.at(l)]))
            }
            Negative::Signed => bytes,
        }
    }

    /// The bytes in a vector and, unless `Signed`, bytes carrying their signs: the
    /// magnitudes or-ed with 0xFF where negative (none is zero).
    #[inline(always)]
    unsafe fn vectors<S: Simd16>(&self) -> (S::Bytes, Option<S::Bytes>) {
        let bytes = match self.magnitudes {
            Magnitudes::Gathered(table, index) => S::bytes_rows4(table, index),
            // Loaded from the words in place: through a copy, LLVM kept IQ1's four words
            // apart and put them together with shuffles, 20% slower on Zen 3.
            Magnitudes::Words(ref words) => S::bytes_load(words.as_ptr() as *const u8),
        };
        let negative = match self.negative {
            Negative::Bits(word) => S::bytes_where_bits(word, 0xFF),
            Negative::Parity(index) => {
                let masks: [u64; 4] = std::array::from_fn(|l| EVEN_SIGN_MASKS[index.at(l)]);
                S::bytes_load(masks.as_ptr() as *const u8)
            }
            Negative::Signed => return (bytes, None),
        };
        (bytes, Some(S::bytes_or(bytes, negative)))
    }
}

/// The 32 weights of one chunk, with their scale.
trait Lattice {
    const SIZE: usize;
    /// The chunk's `w`.
    ///
    /// # Safety
    /// `block` holds a whole block and `j < 8`.
    unsafe fn weights(block: *const u8, j: usize) -> Weights;
    /// The chunk's `base` (exact); by default the block's `d / 8` (`block_d_bits`).
    ///
    /// # Safety
    /// As `weights`.
    #[inline(always)]
    unsafe fn base<S: Simd16>(block: *const u8, _j: usize) -> f32 {
        let d = Self::block_d_bits(block).expect("types without it define their base");
        S::f16_to_f32(d) * BLOCK_D_FRACTION
    }
    /// Where `base` is `d / 8` for the whole block (the types with factors per half chunk),
    /// `d`'s f16 bits: a kernel builds the block's `base` in registers, as the K-quants' `d`.
    ///
    /// # Safety
    /// `block` holds a whole block.
    #[inline(always)]
    unsafe fn block_d_bits(_block: *const u8) -> Option<u16> {
        None
    }
    /// The factors of the chunk's values 0-15 and 16-31.
    ///
    /// # Safety
    /// As `weights`.
    #[inline(always)]
    unsafe fn chunk_factors(_block: *const u8, _j: usize) -> [i16; 2] {
        [1, 1]
    }
}

/// `base / d` of the types with one `base` per block.
const BLOCK_D_FRACTION: f32 = 0.125;

/// The sign of weight `i` of a group of eight in bit `i` of seven stored bits, the eighth
/// bit making the number of negative weights even (ggml's `ksigns_iq2xs`).
#[inline(always)]
const fn even_signs(seven: u32) -> u8 {
    let seven = (seven & 127) as u8;
    seven | (((seven.count_ones() & 1) as u8) << 7)
}

/// Byte `i` 0xFF where bit `i` of `signs` is set, else 0.
#[inline(always)]
const fn sign_mask(signs: u8) -> u64 {
    let spread = (signs as u64).wrapping_mul(0x0101_0101_0101_0101) & 0x8040_2010_0804_0201;
    let negative = ((spread + 0x7F7F_7F7F_7F7F_7F7F) & 0x8080_8080_8080_8080) >> 7;
    negative * 0xFF
}

/// `sign_mask(even_signs(k))`: a table read costs less than the parity.
const EVEN_SIGN_MASKS: [u64; 128] = {
    let mut masks = [0; 128];
    let mut k = 0;
    while k < 128 {
        masks[k] = sign_mask(even_signs(k as u32));
        k += 1;
    }
    masks
};

/// The even-parity signs of four groups, group `l`'s seven bits at bit `7 l` of `word`.
#[inline(always)]
fn even_signs_of(word: u32) -> Negative {
    Negative::Parity(RowIndex::fields(word, 7, 7))
}

/// The eight magnitudes (bytes, none zero) of `row`, negated where `mask`'s byte is 0xFF:
/// bytewise `(g ^ 0xFF) + 1`, which never carries because no `g` is zero.
#[inline(always)]
fn negated_where(row: u64, mask: u64) -> u64 {
    (row ^ mask) + (mask & 0x0101_0101_0101_0101)
}

/// Two four-weight IQ3 codebook rows, the first in the low bytes.
#[inline(always)]
fn two_rows(grid: &[u32], a: usize, b: usize) -> u64 {
    u64::from(grid[a]) | (u64::from(grid[b]) << 32)
}

/// IQ1's eight weights `8 g + 1` (or `8 g - 1` when `negative_shift`) from the codebook's
/// bytes `g + 1` (0, 1 or 2): `8 (g + 1) - 7` (or `- 9`) computed as `(8 (g + 1) + 128 - 7)
/// ^ 128`, whose bytes never carry or borrow (they stay in 0x77..=0x89 before the xor).
#[inline(always)]
fn shifted_eighths(row: u64, negative_shift: bool) -> u64 {
    let biased = if negative_shift {
        0x7777_7777_7777_7777
    } else {
        0x7979_7979_7979_7979
    };
    ((row << 3) + biased) ^ 0x8080_8080_8080_8080
}

#[inline(always)]
unsafe fn u16_at(p: *const u8) -> u16 {
    u16::from_le_bytes([*p, *p.add(1)])
}

#[inline(always)]
unsafe fn u32_at(p: *const u8) -> u32 {
    u32::from_le_bytes(std::ptr::read_unaligned(p as *const [u8; 4]))
}

/// `d * (2 s + 1) / 8` for a 4-bit `s`, as `d * (0.5 + s) * 0.25` (exact either way).
#[inline(always)]
fn eighths(d: f32, s: u32) -> f32 {
    d * ((2 * s + 1) as f32 * 0.125)
}

#[derive(Clone, Copy)]
pub struct IQ2XXS;
#[derive(Clone, Copy)]
pub struct IQ2XS;
#[derive(Clone, Copy)]
pub struct IQ2S;
#[derive(Clone, Copy)]
pub struct IQ3XXS;
#[derive(Clone, Copy)]
pub struct IQ3S;
#[derive(Clone, Copy)]
pub struct IQ1S;
#[derive(Clone, Copy)]
pub struct IQ1M;

/// `[d: f16]`, then per chunk eight bytes: four codebook indices (8 bits) and a word of four
/// 7-bit sign fields and a 4-bit scale `s` on top; `base = d * (2 s + 1) / 8`.
impl Lattice for IQ2XXS {
    const SIZE: usize = 66;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        let q = block.add(2 + 8 * j);
        Weights {
            magnitudes: Magnitudes::rows8(&iq_grids::IQ2_XXS, RowIndex::bytes(q)),
            negative: even_signs_of(u32_at(q.add(4))),
        }
    }
    #[inline(always)]
    unsafe fn base<S: Simd16>(block: *const u8, j: usize) -> f32 {
        eighths(f16_scalar::<S>(block), u32_at(block.add(6 + 8 * j)) >> 28)
    }
}

/// `[d: f16][32 x u16][scales: 8]`: each u16 a 9-bit index and a 7-bit sign field; a 4-bit
/// scale `s` per 16 weights (low nibble of `scales[j]` for chunk `j`'s first half); `base =
/// d / 8`, factors `2 s + 1`.
impl Lattice for IQ2XS {
    const SIZE: usize = 74;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        let q = block.add(2 + 8 * j);
        Weights {
            magnitudes: Magnitudes::rows8(&iq_grids::IQ2_XS, RowIndex::halves(q, 0, 511)),
            negative: Negative::Parity(RowIndex::halves(q, 9, 127)),
        }
    }
    #[inline(always)]
    unsafe fn block_d_bits(block: *const u8) -> Option<u16> {
        Some(u16_at(block))
    }
    #[inline(always)]
    unsafe fn chunk_factors(block: *const u8, j: usize) -> [i16; 2] {
        odd_nibbles(*block.add(66 + j))
    }
}

/// `[d: f16][qs: 32][signs: 32][qh: 8][scales: 8]`: group `k`'s 10-bit index `qs[k]` with
/// bits `2 (k % 4)` of `qh[k / 4]` above, its signs the bits of `signs[k]`; scales as
/// IQ2_XS's.
impl Lattice for IQ2S {
    const SIZE: usize = 82;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        let index = RowIndex::bytes(block.add(2 + 4 * j)).above((*block.add(66 + j)).into(), 2, 2);
        Weights {
            magnitudes: Magnitudes::rows8(&iq_grids::IQ2_S, index),
            negative: Negative::Bits(u32_at(block.add(34 + 4 * j))),
        }
    }
    #[inline(always)]
    unsafe fn block_d_bits(block: *const u8) -> Option<u16> {
        Some(u16_at(block))
    }
    #[inline(always)]
    unsafe fn chunk_factors(block: *const u8, j: usize) -> [i16; 2] {
        odd_nibbles(*block.add(74 + j))
    }
}

/// `2 s + 1` of a byte's low and high nibbles.
#[inline(always)]
fn odd_nibbles(byte: u8) -> [i16; 2] {
    [2 * i16::from(byte & 15) + 1, 2 * i16::from(byte >> 4) + 1]
}

/// `[d: f16][qs: 64][32 bytes]`: eight 8-bit indices of four-weight rows per chunk, and
/// per chunk a word of four 7-bit sign fields (one per eight weights) and a 4-bit scale `s`
/// on top; `base = d * (2 s + 1) / 4`.
impl Lattice for IQ3XXS {
    const SIZE: usize = 98;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        Weights {
            magnitudes: Magnitudes::rows4(
                &iq_grids::IQ3_XXS,
                RowIndex::bytes(block.add(2 + 8 * j)),
            ),
            negative: even_signs_of(u32_at(block.add(66 + 4 * j))),
        }
    }
    #[inline(always)]
    unsafe fn base<S: Simd16>(block: *const u8, j: usize) -> f32 {
        2.0 * eighths(f16_scalar::<S>(block), u32_at(block.add(66 + 4 * j)) >> 28)
    }
}

/// `[d: f16][qs: 64][qh: 8][signs: 32][scales: 4]`: index `k` of chunk `j` is `qs[8 j + k]`
/// with bit `k` of `qh[j]` above; the signs are the bits of `signs[4 j..]`; a 4-bit `s` per
/// chunk (nibble `j % 2` of `scales[j / 2]`), `base = d * (2 s + 1)`.
impl Lattice for IQ3S {
    const SIZE: usize = 110;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        let index = RowIndex::bytes(block.add(2 + 8 * j)).above((*block.add(66 + j)).into(), 1, 1);
        Weights {
            magnitudes: Magnitudes::rows4(&iq_grids::IQ3_S, index),
            negative: Negative::Bits(u32_at(block.add(74 + 4 * j))),
        }
    }
    #[inline(always)]
    unsafe fn base<S: Simd16>(block: *const u8, j: usize) -> f32 {
        let s = (*block.add(106 + j / 2) >> (4 * (j % 2))) & 15;
        f16_scalar::<S>(block) * f32::from(2 * s + 1)
    }
}

/// `[d: f16][qs: 32][qh: 8 x u16]`: chunk `j`'s word `qh[j]` holds the 3 high bits of its
/// four 11-bit indices (bits `3 l`), a 3-bit scale `s` (bits 12-14) and the sign of the
/// shift (bit 15); value `d (2 s + 1) (g +- 1/8)`, so `w = 8 g +- 1`, `base = d (2 s + 1) / 8`.
impl Lattice for IQ1S {
    const SIZE: usize = 50;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        let high = u16_at(block.add(34 + 2 * j));
        let bytes = std::array::from_fn(|l| {
            let index =
                usize::from(*block.add(2 + 4 * j + l)) | (usize::from((high >> (3 * l)) & 7) << 8);
            shifted_eighths(iq_grids::IQ1_S[index], high & 0x8000 != 0)
        });
        Weights {
            magnitudes: Magnitudes::Words(bytes),
            negative: Negative::Signed,
        }
    }
    #[inline(always)]
    unsafe fn base<S: Simd16>(block: *const u8, j: usize) -> f32 {
        let s = u32::from((u16_at(block.add(34 + 2 * j)) >> 12) & 7);
        eighths(f16_scalar::<S>(block), s)
    }
}

/// `[qs: 32][qh: 16][scales: 4 x u16]`: group `k`'s index `qs[k]` with the low 3 bits of
/// nibble `k % 2` of `qh[k / 2]` above and that nibble's bit 3 the sign of its shift; a 3-bit
/// scale per 16 weights (bits `3 i` of scale word `i / 4`), and `d`'s f16 bits the top
/// nibbles of the four scale words; `w = 8 g +- 1`, `base = d / 8`, factors `2 s + 1`.
impl Lattice for IQ1M {
    const SIZE: usize = 56;
    #[inline(always)]
    unsafe fn weights(block: *const u8, j: usize) -> Weights {
        let bytes = std::array::from_fn(|l| {
            let k = 4 * j + l;
            let nibble = (*block.add(32 + k / 2) >> (4 * (k % 2))) & 15;
            let index = usize::from(*block.add(k)) | (usize::from(nibble & 7) << 8);
            shifted_eighths(iq_grids::IQ1_S[index], nibble & 8 != 0)
        });
        Weights {
            magnitudes: Magnitudes::Words(bytes),
            negative: Negative::Signed,
        }
    }
    #[inline(always)]
    unsafe fn block_d_bits(block: *const u8) -> Option<u16> {
        Some(iq1m_d_bits(block))
    }
    #[inline(always)]
    unsafe fn chunk_factors(block: *const u8, j: usize) -> [i16; 2] {
        std::array::from_fn(|h| {
            let i = 2 * j + h;
            let s = (u16_at(block.add(48 + 2 * (i / 4))) >> (3 * (i % 4))) & 7;
            2 * s as i16 + 1
        })
    }
}

/// IQ1_M's `d`: its f16 bits in the top nibbles of the four scale words.
#[inline(always)]
unsafe fn iq1m_d_bits(block: *const u8) -> u16 {
    let word = |i: usize| u16_at(block.add(48 + 2 * i));
    (word(0) >> 12) | ((word(1) >> 8) & 0xF0) | ((word(2) >> 4) & 0xF00) | (word(3) & 0xF000)
}

/// `Format` and `IntFormat` of a `Lattice` type: signed integers without offsets, `SPAN`
/// from its largest `|w|` (`2 * 127 * |w| * SPAN < 2^15`).
macro_rules! lattice_format {
    ($T:ty, span: $span:expr, factors: $factors:expr) => {
        impl Format for $T {
            const VALUES: usize = 256;
            const BYTES: usize = <$T as Lattice>::SIZE;
            #[inline(always)]
            unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
                let (b, j) = (row.add((chunk / 8) * <Self as Format>::BYTES), chunk % 8);
                let w = Self::weights(b, j).signed();
                let w = w.as_ptr() as *const i8;
                let base = Self::base::<S>(b, j);
                let [lo, hi] = Self::chunk_factors(b, j);
                (
                    S::mul(S::splat(base * f32::from(lo)), S::load_i8(w)),
                    S::mul(S::splat(base * f32::from(hi)), S::load_i8(w.add(16))),
                )
            }
        }

        impl IntFormat for $T {
            const OFFSET: bool = false;
            const SIGNED: bool = true;
            const SPAN: usize = $span;
            const FACTORS: Factors = $factors;
            #[inline(always)]
            unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
                let (b, j) = (row.add((chunk / 8) * <Self as Format>::BYTES), chunk % 8);
                match Self::weights(b, j).vectors::<S>() {
                    (bytes, None) => bytes,
                    (bytes, Some(signs)) => S::bytes_sign(bytes, signs),
                }
            }
            #[inline(always)]
            unsafe fn chunk_abs_signs<S: Simd16>(
                row: *const u8,
                chunk: usize,
            ) -> (S::Bytes, S::Bytes) {
                let (b, j) = (row.add((chunk / 8) * <Self as Format>::BYTES), chunk % 8);
                match Self::weights(b, j).vectors::<S>() {
                    (bytes, None) => (S::bytes_abs(bytes), bytes),
                    (bytes, Some(signs)) => (bytes, signs),
                }
            }
            #[inline(always)]
            unsafe fn factors(row: *const u8, chunk: usize) -> [i16; 2] {
                Self::chunk_factors(row.add((chunk / 8) * <Self as Format>::BYTES), chunk % 8)
            }
            const D_FRACTION: f32 = BLOCK_D_FRACTION;
            #[inline(always)]
            unsafe fn super_block_fields(block: *const u8) -> Option<SuperBlockFields> {
                Self::block_d_bits(block).map(|d| SuperBlockFields {
                    d,
                    ..Default::default()
                })
            }
            #[inline(always)]
            unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
                let (b, j) = (row.add((chunk / 8) * <Self as Format>::BYTES), chunk % 8);
                (Self::base::<S>(b, j), 0.0)
            }
        }
    };
}

// |w| up to 43 (IQ2), 62 (IQ3_XXS), 15 (IQ3_S), 9 (IQ1); factors per half chunk widen
// every half on its own (a span of at most 4).
lattice_format!(IQ2XXS, span: 2, factors: Factors::One);
lattice_format!(IQ2XS, span: 2, factors: Factors::PerHalf);
lattice_format!(IQ2S, span: 2, factors: Factors::PerHalf);
lattice_format!(IQ3XXS, span: 2, factors: Factors::One);
lattice_format!(IQ3S, span: 8, factors: Factors::One);
lattice_format!(IQ1S, span: 8, factors: Factors::One);
lattice_format!(IQ1M, span: 4, factors: Factors::PerHalf);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd::Scalar;

    /// The integer kernels' bytes of random blocks, `chunk_q` and `chunk_abs_signs` (`|q|`
    /// and a carrier of q's sign, never zero), are the float path's signed weights
    /// (`Weights::signed`, negated bytewise in 64-bit words).
    fn abs_signs_match_values<T: IntFormat + Lattice>() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let block: Vec<u8> = (0..4 * <T as Lattice>::SIZE)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for chunk in 0..32 {
            let b = block[(chunk / 8) * <T as Lattice>::SIZE..].as_ptr();
            let want = unsafe { T::weights(b, chunk % 8).signed() };
            let want: Vec<i8> = want
                .iter()
                .flat_map(|w| w.to_le_bytes())
                .map(|v| v as i8)
                .collect();
            let q = unsafe { T::chunk_q::<Scalar>(block.as_ptr(), chunk) };
            let (abs, signs) = unsafe { T::chunk_abs_signs::<Scalar>(block.as_ptr(), chunk) };
            for i in 0..32 {
                let (q, signs) = (q[i] as i8, signs[i] as i8);
                assert_eq!(q, want[i], "chunk {chunk} byte {i}");
                assert_eq!(abs[i], want[i].unsigned_abs(), "chunk {chunk} byte {i}");
                assert_eq!(signs.signum(), want[i].signum(), "chunk {chunk} byte {i}");
            }
        }
    }

    #[test]
    fn magnitudes_and_signs_apart_are_the_values() {
        abs_signs_match_values::<IQ2XXS>();
        abs_signs_match_values::<IQ2XS>();
        abs_signs_match_values::<IQ2S>();
        abs_signs_match_values::<IQ3XXS>();
        abs_signs_match_values::<IQ3S>();
        abs_signs_match_values::<IQ1S>();
        abs_signs_match_values::<IQ1M>();
    }

    #[test]
    fn even_signs_are_ggmls_sign_table() {
        // The first and last rows of ggml's `ksigns_iq2xs`.
        let first = [0x00, 0x81, 0x82, 0x03, 0x84, 0x05, 0x06, 0x87];
        let last = [0x78, 0xf9, 0xfa, 0x7b, 0xfc, 0x7d, 0x7e, 0xff];
        for i in 0..8 {
            assert_eq!(even_signs(i as u32), first[i]);
            assert_eq!(even_signs(120 + i as u32), last[i]);
        }
    }

    #[test]
    fn iq1_weights_are_eight_g_plus_or_minus_one() {
        // Rows of `g + 1` in every combination of the three values over the bytes.
        for seed in 0..6561u64 {
            let g: [u8; 8] = std::array::from_fn(|i| ((seed / 3u64.pow(i as u32 % 8)) % 3) as u8);
            let row = u64::from_le_bytes(g);
            for (negative, shift) in [(false, 1i8), (true, -1)] {
                let got = shifted_eighths(row, negative).to_le_bytes();
                for i in 0..8 {
                    let want = 8 * (g[i] as i8 - 1) + shift;
                    assert_eq!(got[i] as i8, want, "byte {i} of {g:?}, shift {shift}");
                }
            }
        }
    }

    #[test]
    fn signs_negate_exactly_the_flagged_bytes() {
        let row = 0x2b19_0808_2b19_082b_u64;
        for signs in 0..=255u8 {
            let got = negated_where(row, sign_mask(signs)).to_le_bytes();
            for (i, (&g, &m)) in got.iter().zip(&row.to_le_bytes()).enumerate() {
                let want = if signs >> i & 1 == 1 {
                    -(m as i8)
                } else {
                    m as i8
                };
                assert_eq!(g as i8, want, "byte {i} of signs {signs:08b}");
            }
        }
    }
}
