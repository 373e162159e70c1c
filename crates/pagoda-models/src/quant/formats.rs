//! The block layouts of GGUF tensor types, decoded 32 values at a time into two `Simd16`
//! vectors. Each value is computed with the same f32 operations, in the same order, as the
//! `gguf` package's reference dequantizers (`d * q`, `(d * sc) * q - dmin * m`), so the
//! weights a kernel multiplies by are bitwise the weights that file decodes to, on every path.

use half::{bf16, f16};

use crate::kernels::simd::Simd16;

/// One tensor type's layout. A row is `cols / VALUES` blocks of `BYTES` bytes.
pub trait Format: Copy + Send + Sync + 'static {
    const VALUES: usize;
    const BYTES: usize;
    /// Rows already f32 (nothing to decode).
    const IS_F32: bool = false;
    /// Values `32 * chunk .. 32 * chunk + 32` of the row at `row`.
    ///
    /// # Safety
    /// `row` points at a whole row of this format holding that chunk; `S`'s path is enabled.
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S);
}

/// The f16 at `p` in every lane.
#[inline(always)]
unsafe fn f16_at<S: Simd16>(p: *const u8) -> S {
    S::splat_f16(u16::from_le_bytes([*p, *p.add(1)]))
}

#[derive(Clone, Copy)]
pub struct F32Rows;
#[derive(Clone, Copy)]
pub struct F16Rows;
#[derive(Clone, Copy)]
pub struct Bf16Rows;
#[derive(Clone, Copy)]
pub struct Q8_0;
#[derive(Clone, Copy)]
pub struct Q4_0;
#[derive(Clone, Copy)]
pub struct Q4_1;
#[derive(Clone, Copy)]
pub struct Q5_0;
#[derive(Clone, Copy)]
pub struct Q5_1;
#[derive(Clone, Copy)]
pub struct Q2K;
#[derive(Clone, Copy)]
pub struct Q3K;
#[derive(Clone, Copy)]
pub struct IQ4NL;
#[derive(Clone, Copy)]
pub struct IQ4XS;
#[derive(Clone, Copy)]
pub struct Q4K;
#[derive(Clone, Copy)]
pub struct Q5K;
#[derive(Clone, Copy)]
pub struct Q6K;

impl Format for F32Rows {
    const VALUES: usize = 1;
    const BYTES: usize = 4;
    const IS_F32: bool = true;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let p = (row as *const f32).add(32 * chunk);
        (S::load(p), S::load(p.add(16)))
    }
}

impl Format for F16Rows {
    const VALUES: usize = 1;
    const BYTES: usize = 2;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let p = (row as *const f16).add(32 * chunk);
        (S::load_f16(p), S::load_f16(p.add(16)))
    }
}

impl Format for Bf16Rows {
    const VALUES: usize = 1;
    const BYTES: usize = 2;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let p = (row as *const bf16).add(32 * chunk);
        (S::load_bf16(p), S::load_bf16(p.add(16)))
    }
}

/// `[d: f16][q: 32 x i8]`, value `q * d`.
impl Format for Q8_0 {
    const VALUES: usize = 32;
    const BYTES: usize = 34;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let b = row.add(chunk * Self::BYTES);
        let d = f16_at::<S>(b);
        let q = b.add(2) as *const i8;
        (S::mul(S::load_i8(q), d), S::mul(S::load_i8(q.add(16)), d))
    }
}

/// `[d: f16][16 bytes]`: value `i` is the low nibble of byte `i`, value `16 + i` its high
/// nibble; value `d * (q - 8)`.
impl Format for Q4_0 {
    const VALUES: usize = 32;
    const BYTES: usize = 18;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let b = row.add(chunk * Self::BYTES);
        let d = f16_at::<S>(b);
        let eight = S::splat(8.0);
        let (lo, hi) = S::load_u8_nibbles(b.add(2));
        let (lo, hi) = (S::sub(lo, eight), S::sub(hi, eight));
        (S::mul(d, lo), S::mul(d, hi))
    }
}

/// `[d: f16][m: f16][16 bytes]`, nibbles as Q4_0; value `d * q + m`.
impl Format for Q4_1 {
    const VALUES: usize = 32;
    const BYTES: usize = 20;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let b = row.add(chunk * Self::BYTES);
        let (d, m) = (f16_at::<S>(b), f16_at::<S>(b.add(2)));
        let (lo, hi) = S::load_u8_nibbles(b.add(4));
        (S::add(S::mul(d, lo), m), S::add(S::mul(d, hi), m))
    }
}

/// The 32 values of a Q5_0/Q5_1 block before scaling: nibbles from `qs`, plus 16 where bit
/// `i` of the little-endian u32 at `qh` is set (small integers: exact in f32).
#[inline(always)]
unsafe fn five_bit_values<S: Simd16>(qh: *const u8, qs: *const u8) -> (S, S) {
    let word = u32::from_le_bytes([*qh, *qh.add(1), *qh.add(2), *qh.add(3)]);
    S::five_bit_values(qs, word)
}

/// `[d: f16][qh: u32][16 bytes]`: nibbles as Q4_0 plus a fifth bit; value `d * (q - 16)`.
impl Format for Q5_0 {
    const VALUES: usize = 32;
    const BYTES: usize = 22;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let b = row.add(chunk * Self::BYTES);
        let d = f16_at::<S>(b);
        let (lo, hi) = five_bit_values::<S>(b.add(2), b.add(6));
        let sixteen = S::splat(16.0);
        (
            S::mul(d, S::sub(lo, sixteen)),
            S::mul(d, S::sub(hi, sixteen)),
        )
    }
}

/// `[d: f16][m: f16][qh: u32][16 bytes]`; value `d * q + m`.
impl Format for Q5_1 {
    const VALUES: usize = 32;
    const BYTES: usize = 24;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let b = row.add(chunk * Self::BYTES);
        let (d, m) = (f16_at::<S>(b), f16_at::<S>(b.add(2)));
        let (lo, hi) = five_bit_values::<S>(b.add(4), b.add(8));
        (S::add(S::mul(d, lo), m), S::add(S::mul(d, hi), m))
    }
}

/// Scale and min of sub-block `j` from the 12 packed bytes of a Q4_K/Q5_K super-block:
/// six bits each, the high two bits of sub-blocks 4-7 kept in the top of bytes 0-7.
#[inline(always)]
unsafe fn scale_min(scales: *const u8, j: usize) -> (f32, f32) {
    let (sc, m) = scale_min_ints(scales, j);
    (f32::from(sc), f32::from(m))
}

/// `scale_min` as the 6-bit integers.
#[inline(always)]
unsafe fn scale_min_ints(scales: *const u8, j: usize) -> (u8, u8) {
    let s = |i: usize| *scales.add(i);
    let (sc, m) = if j < 4 {
        (s(j) & 63, s(j + 4) & 63)
    } else {
        (
            (s(j + 4) & 0x0F) | ((s(j - 4) >> 2) & 0x30),
            (s(j + 4) >> 4) | ((s(j) >> 2) & 0x30),
        )
    };
    (sc, m)
}

/// Super-blocks of 256: `[scales: 16][qs: 64][d: f16][dmin: f16]`, sixteen sub-blocks of 16.
/// Chunk `g` (values `32g..32g+32`) is bits `2 (g % 4)` of `qs[32 (g / 4) ..]`, its halves
/// sub-blocks `2g` and `2g + 1`, whose scale byte holds `sc` low and `m` high; value
/// `(d * sc) * q - dmin * m`.
impl Format for Q2K {
    const VALUES: usize = 256;
    const BYTES: usize = 84;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let (d, dmin) = (f16_at::<S>(b.add(80)), f16_at::<S>(b.add(82)));
        let qs = b.add(16 + (g / 4) * 32);
        let shift = 2 * (g as u32 % 4);
        (
            q2k_half(d, dmin, *b.add(2 * g), S::load_u8_bits(qs, shift, 3)),
            q2k_half(
                d,
                dmin,
                *b.add(2 * g + 1),
                S::load_u8_bits(qs.add(16), shift, 3),
            ),
        )
    }
}

/// One Q2_K sub-block's values from its scale byte and its 2-bit `q`. (Functions, not
/// closures: a closure is compiled without the path's target features.)
#[inline(always)]
unsafe fn q2k_half<S: Simd16>(d: S, dmin: S, field: u8, q: S) -> S {
    let scale = S::mul(d, S::splat(f32::from(field & 15)));
    let min = S::mul(dmin, S::splat(f32::from(field >> 4)));
    S::sub(S::mul(scale, q), min)
}

/// Super-blocks of 256: `[hmask: 32][qs: 64][scales: 12][d: f16]`, sixteen sub-blocks of 16.
/// Chunk `g`'s low two bits are Q2_K's, its third bit `g` of `hmask[0..32]`; its halves'
/// scales are six bits (sub-block `k`: nibble `k / 8` of byte `k % 8`, and bits
/// `2 (k / 4)` of byte `8 + k % 4` above them) less 32; value `(d * sc) * (q - 4)`, `q` the
/// three bits.
impl Format for Q3K {
    const VALUES: usize = 256;
    const BYTES: usize = 110;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let d = f16_at::<S>(b.add(108));
        let qs = b.add(32 + (g / 4) * 32);
        let shift = 2 * (g as u32 % 4);
        (
            q3k_half(b, g, 0, qs, shift, d),
            q3k_half(b, g, 1, qs, shift, d),
        )
    }
}

/// Half `h` of chunk `g` of the Q3_K super-block at `b`.
#[inline(always)]
unsafe fn q3k_half<S: Simd16>(
    b: *const u8,
    g: usize,
    h: usize,
    qs: *const u8,
    shift: u32,
    d: S,
) -> S {
    let scale = S::mul(d, S::splat(f32::from(q3k_scale(b.add(96), 2 * g + h))));
    // Small integers: the float sums are exact.
    let q = S::fma(
        S::load_u8_bits(b.add(16 * h), g as u32, 1),
        S::splat(4.0),
        S::add(S::load_u8_bits(qs.add(16 * h), shift, 3), S::splat(-4.0)),
    );
    S::mul(scale, q)
}

/// Sub-block `k`'s scale of a Q3_K super-block from its 12 packed bytes, less 32.
#[inline(always)]
unsafe fn q3k_scale(scales: *const u8, k: usize) -> i8 {
    let low = (*scales.add(k % 8) >> (4 * (k / 8))) & 15;
    let high = (*scales.add(8 + k % 4) >> (2 * (k / 4))) & 3;
    (low | high << 4) as i8 - 32
}

/// Super-blocks of 256: `[d: f16][dmin: f16][scales: 12][qs: 128]`, eight sub-blocks of 32;
/// qs chunk `c` holds sub-block `2c` in its low nibbles and `2c + 1` in its high ones; value
/// `(d * sc) * q - dmin * m`.
impl Format for Q4K {
    const VALUES: usize = 256;
    const BYTES: usize = 144;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let (b, j) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let (sc, m) = scale_min(b.add(4), j);
        let scale = S::mul(f16_at::<S>(b), S::splat(sc));
        let min = S::mul(f16_at::<S>(b.add(2)), S::splat(m));
        let qs = b.add(16 + (j / 2) * 32);
        let (lo, hi) = S::nibbles32(qs, 4 * (j as u32 % 2));
        (
            S::sub(S::mul(scale, lo), min),
            S::sub(S::mul(scale, hi), min),
        )
    }
}

/// As Q4_K with a fifth bit: `[d][dmin][scales: 12][qh: 32][qs: 128]`, bit `j` of `qh[i]`
/// is the high bit of value `i` of sub-block `j`.
impl Format for Q5K {
    const VALUES: usize = 256;
    const BYTES: usize = 176;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let (b, j) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let (sc, m) = scale_min(b.add(4), j);
        let scale = S::mul(f16_at::<S>(b), S::splat(sc));
        let min = S::mul(f16_at::<S>(b.add(2)), S::splat(m));
        let (qh, qs) = (b.add(16), b.add(48 + (j / 2) * 32));
        let shift = 4 * (j as u32 % 2);
        let sixteen = S::splat(16.0);
        // Small integers: the float sums are exact.
        let lo = S::fma(
            S::load_u8_bits(qh, j as u32, 1),
            sixteen,
            S::load_u8_bits(qs, shift, 15),
        );
        let hi = S::fma(
            S::load_u8_bits(qh.add(16), j as u32, 1),
            sixteen,
            S::load_u8_bits(qs.add(16), shift, 15),
        );
        (
            S::sub(S::mul(scale, lo), min),
            S::sub(S::mul(scale, hi), min),
        )
    }
}

/// Super-blocks of 256: `[ql: 128][qh: 64][scales: 16 x i8][d: f16]`, sixteen sub-blocks of
/// 16. Chunk `g` (values `32g..32g+32`) takes its low four bits from nibble `(g % 4) / 2` of
/// `ql[64 (g / 4) + 32 (g % 2) ..]` and its high two bits from bits `2 (g % 4)` of
/// `qh[32 (g / 4) ..]`; value `(d * sc) * (q - 32)`.
impl Format for Q6K {
    const VALUES: usize = 256;
    const BYTES: usize = 210;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let (h, r) = (g / 4, g % 4);
        let ql = b.add(h * 64 + (r % 2) * 32);
        let qh = b.add(128 + h * 32);
        let scales = b.add(192) as *const i8;
        let d = f16_at::<S>(b.add(208));
        let (lo_shift, hi_shift) = (4 * (r as u32 / 2), 2 * r as u32);
        let (lo, hi) = S::six_bit_values(ql, qh, lo_shift, hi_shift);
        let scale_lo = S::mul(d, S::splat(f32::from(*scales.add(2 * g))));
        let scale_hi = S::mul(d, S::splat(f32::from(*scales.add(2 * g + 1))));
        (S::mul(scale_lo, lo), S::mul(scale_hi, hi))
    }
}

/// The sixteen values IQ4_NL and IQ4_XS's nibbles stand for (ggml's `kvalues_iq4nl`: closer
/// together near zero, where most weights are), as the bytes of signed integers.
const IQ4_VALUES: [u8; 16] = {
    let values: [i8; 16] = [
        -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
    ];
    let mut bytes = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        bytes[i] = values[i] as u8;
        i += 1;
    }
    bytes
};

/// The 32 values of the 16 nibble bytes at `qs` (low nibbles are values 0-15, high ones
/// 16-31) as f32 lanes.
#[inline(always)]
unsafe fn iq4_values<S: Simd16>(qs: *const u8) -> (S, S) {
    let mut values = [0i8; 32];
    for i in 0..16 {
        let byte = *qs.add(i);
        values[i] = IQ4_VALUES[usize::from(byte & 15)] as i8;
        values[i + 16] = IQ4_VALUES[usize::from(byte >> 4)] as i8;
    }
    (
        S::load_i8(values.as_ptr()),
        S::load_i8(values.as_ptr().add(16)),
    )
}

/// `[d: f16][16 bytes]`, nibbles as Q4_0's; value `d * IQ4_VALUES[nibble]`.
impl Format for IQ4NL {
    const VALUES: usize = 32;
    const BYTES: usize = 18;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let b = row.add(chunk * Self::BYTES);
        let d = f16_at::<S>(b);
        let (lo, hi) = iq4_values::<S>(b.add(2));
        (S::mul(d, lo), S::mul(d, hi))
    }
}

/// Super-blocks of 256: `[d: f16][scales_h: u16][scales_l: 4][qs: 128]`, eight sub-blocks
/// of 32 (chunk `j`: nibbles as IQ4_NL's at `qs[16 j..]`, a 6-bit scale of nibble `j % 2`
/// of `scales_l[j / 2]` and bits `2 j` of `scales_h` above it, less 32); value
/// `(d * scale) * IQ4_VALUES[nibble]`.
impl Format for IQ4XS {
    const VALUES: usize = 256;
    const BYTES: usize = 136;
    #[inline(always)]
    unsafe fn decode32<S: Simd16>(row: *const u8, chunk: usize) -> (S, S) {
        let (b, j) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let scale = S::splat(iq4xs_scale::<S>(b, j));
        let (lo, hi) = iq4_values::<S>(b.add(8 + 16 * j));
        (S::mul(scale, lo), S::mul(scale, hi))
    }
}

/// Sub-block `j`'s `d * scale` of the IQ4_XS super-block at `b` (exact: an f16 times an
/// integer below 64 in magnitude).
#[inline(always)]
unsafe fn iq4xs_scale<S: Simd16>(b: *const u8, j: usize) -> f32 {
    let high = (u16::from_le_bytes([*b.add(2), *b.add(3)]) >> (2 * j)) & 3;
    let low = (*b.add(4 + j / 2) >> (4 * (j % 2))) & 15;
    let scale = i32::from(low) | (i32::from(high) << 4);
    f16_scalar::<S>(b) * (scale - 32) as f32
}

/// Formats whose chunks of 32 are small integers times a scale (plus an offset): the kernels
/// multiply them by 8-bit activations in integers (`kernels::quant_int`). Value `i` of a
/// chunk is `scale * (f(i) * q[i]) + offset`, `f(i)` the chunk's integer factor of values 0-15
/// or 16-31 (the sub-block scales of K-quants; 1 elsewhere).
/// Which integer factors a format's chunks carry (`IntFormat::factors`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Factors {
    /// All 1.
    One,
    /// One per chunk (both halves the same).
    PerChunk,
    /// One per half chunk of 16 values.
    PerHalf,
}

/// A super-block's fields as stored (`IntFormat::super_block_fields`): `d` and `dmin` as f16
/// bits, and for Q4_K/Q5_K the eight 6-bit scales `sc` and mins `m` unpacked to bytes.
#[derive(Clone, Copy, Default)]
pub struct SuperBlockFields {
    pub d: u16,
    pub dmin: u16,
    pub scales: u64,
    pub mins: u64,
}

pub trait IntFormat: Format {
    /// Values carry an offset (`d * q + m`, `d * (sc * q) - dmin * m`).
    const OFFSET: bool;
    /// `q` is signed; otherwise its bytes are below 128.
    const SIGNED: bool;
    /// How many vectors of products may add their 16-bit pair sums (`2 * 127 * max |q|`
    /// each) before widening: at most 8 (4 with factors per half chunk), and below 2^15 in
    /// all.
    const SPAN: usize;
    /// What `factors` returns: products may skip factors of 1 and multiply by one per chunk.
    const FACTORS: Factors = Factors::One;
    /// Chunk `chunk`'s integers `q` of the row at `row`.
    ///
    /// # Safety
    /// As `Format::decode32`.
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes;
    /// A signed format's `|q|` and bytes carrying the signs of `q` (negative where `q` is,
    /// not zero where `q` is not): the operands of `vpmaddubsw` and of the `vpsignb` that
    /// moves the signs onto the activations. The codebook types hold magnitudes and signs
    /// apart and hand them over without negating.
    ///
    /// # Safety
    /// As `Format::decode32`.
    #[inline(always)]
    unsafe fn chunk_abs_signs<S: Simd16>(row: *const u8, chunk: usize) -> (S::Bytes, S::Bytes) {
        let q = Self::chunk_q::<S>(row, chunk);
        (S::bytes_abs(q), q)
    }
    /// A signed format's `q + 128` as unsigned bytes (the unsigned operand of `vpdpbusd`
    /// without moving the signs onto the activations).
    ///
    /// # Safety
    /// As `Format::decode32`.
    #[inline(always)]
    unsafe fn chunk_biased<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_sub(Self::chunk_q::<S>(row, chunk), 128)
    }
    /// For a signed format whose values are stored as the bytes `q + STORED_BIAS`, below
    /// 64 (Q4_0, Q5_0, Q6_K), that bias; 0 for the others. `vpmaddubsw` takes such bytes as
    /// they are, and the bias's share (`STORED_BIAS * sum(f * x)`) comes off the totals
    /// after, instead of moving the signs onto the activations.
    const STORED_BIAS: u8 = 0;
    /// `STORED_BIAS` where the stored bytes are below 32 and the factors one (Q4_0, Q5_0):
    /// then decode takes the bias's share from each chunk's sum of activations.
    const LOW_BIAS: u8 = if Self::STORED_BIAS < 32 && matches!(Self::FACTORS, Factors::One) {
        Self::STORED_BIAS
    } else {
        0
    };
    /// Chunk `chunk`'s `q + STORED_BIAS` (only called where `STORED_BIAS` is not 0).
    ///
    /// # Safety
    /// As `Format::decode32`.
    #[inline(always)]
    unsafe fn chunk_stored<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_sub(
            Self::chunk_q::<S>(row, chunk),
            0u8.wrapping_sub(Self::STORED_BIAS),
        )
    }
    /// The chunk's integer factors of values 0-15 and 16-31.
    ///
    /// # Safety
    /// As `Format::decode32`.
    #[inline(always)]
    unsafe fn factors(_row: *const u8, _chunk: usize) -> [i16; 2] {
        [1, 1]
    }
    /// The factors of chunks `first..first + 8`'s halves: `[2 c + h]` that of half `h` of
    /// chunk `first + c` (eight at a time: the super-block formats' fields).
    ///
    /// # Safety
    /// As `Format::decode32`, for all eight chunks.
    #[inline(always)]
    unsafe fn half_factors(row: *const u8, first: usize) -> [i8; 16] {
        let mut f = [0i8; 16];
        for c in 0..8 {
            let [lo, hi] = Self::factors(row, first + c);
            (f[2 * c], f[2 * c + 1]) = (lo as i8, hi as i8);
        }
        f
    }
    /// Each half chunk has its own offset (Q2_K's sub-blocks of 16: `-dmin * m`): a chunk's
    /// `offset` is then `-dmin` alone, and it multiplies `m_low * sum(x_low) + m_high *
    /// sum(x_high)` (`half_mins`, the activations' `halves`), not the sum of the chunk.
    const HALF_MINS: bool = false;
    /// With `HALF_MINS`, the mins of chunks `first..first + 8`'s halves, `[2 c + h]` that of
    /// half `h` of chunk `first + c` (as `half_factors`).
    ///
    /// # Safety
    /// As `Format::decode32`, for all eight chunks.
    #[inline(always)]
    unsafe fn half_mins(_row: *const u8, _first: usize) -> [u8; 16] {
        [0; 16]
    }
    /// For formats of 256-value super-blocks whose scale is one per block (Q4_K, Q5_K, Q6_K,
    /// the codebook types with factors per half chunk), the fields of the block at `block`
    /// that set its chunks' scale (`d`), offsets (`-(dmin * m)`) and, for Q4_K/Q5_K, factors
    /// (`sc`): a kernel may build them in registers, once per eight chunks.
    ///
    /// # Safety
    /// `block` holds a whole block.
    #[inline(always)]
    unsafe fn super_block_fields(_block: *const u8) -> Option<SuperBlockFields> {
        None
    }
    /// The scale `super_block_fields` stands for is `d` times this, a power of two (exact):
    /// the codebook types' `d / 8`.
    const D_FRACTION: f32 = 1.0;
    /// Each chunk's scale is the f16 in its first two bytes and it has no offset (Q8_0, Q4_0,
    /// Q5_0): a kernel may gather a group's scales in one instruction.
    const SCALE_F16_FIRST: bool = false;
    /// The chunk's `scale` and `offset`.
    ///
    /// # Safety
    /// As `Format::decode32`.
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32);
    /// `scale_offset` of chunks `first..first + count` to `scale[k]` and, with `OFFSET`,
    /// `offset[k]` (formats with fields shared by a super-block decode them once).
    ///
    /// # Safety
    /// As `Format::decode32`, and `scale` and `offset` hold `count` floats.
    #[inline(always)]
    unsafe fn scales_into<S: Simd16>(
        row: *const u8,
        first: usize,
        count: usize,
        scale: *mut f32,
        offset: *mut f32,
    ) {
        for k in 0..count {
            let (s, o) = Self::scale_offset::<S>(row, first + k);
            *scale.add(k) = s;
            if Self::OFFSET {
                *offset.add(k) = o;
            }
        }
    }
}

/// What `super_block_scales_into` writes to the offsets.
#[derive(PartialEq, Eq)]
enum BlockOffsets {
    /// None (formats without offsets): left untouched.
    None,
    /// Q4_K/Q5_K's `-(dmin * m)`, `m` in the packed scales at byte 4.
    KMins,
    /// Q2_K's `-dmin` (its mins are per half chunk: `IntFormat::HALF_MINS`).
    Dmin,
}

/// `scales_into` for super-blocks of 8 chunks, their fields decoded once per super-block:
/// the scale `d` at byte `D_AT`, `dmin` (where there are offsets) right after it.
#[inline(always)]
unsafe fn super_block_scales_into<S: Simd16, const D_AT: usize>(
    offsets_of: BlockOffsets,
    row: *const u8,
    block_bytes: usize,
    first: usize,
    count: usize,
    scale: *mut f32,
    offset: *mut f32,
) {
    let with_offsets = offsets_of != BlockOffsets::None;
    let mut k = 0;
    while k < count {
        let chunk = first + k;
        let b = row.add((chunk / 8) * block_bytes);
        let d = f16_scalar::<S>(b.add(D_AT));
        let mut offsets = [0.0f32; 8];
        if with_offsets {
            let dmin = f16_scalar::<S>(b.add(D_AT + 2));
            offsets = match offsets_of {
                BlockOffsets::KMins => k_mins(b.add(4)).map(|m| -(dmin * f32::from(m))),
                _ => [-dmin; 8],
            };
        }
        if chunk.is_multiple_of(8) && count - k >= 8 {
            // A whole super-block: fixed-length stores the compiler makes vectors of.
            for (j, &o) in offsets.iter().enumerate() {
                *scale.add(k + j) = d;
                if with_offsets {
                    *offset.add(k + j) = o;
                }
            }
            k += 8;
            continue;
        }
        let n = (count - k).min(8 - chunk % 8);
        for j in 0..n {
            *scale.add(k + j) = d;
            if with_offsets {
                *offset.add(k + j) = offsets[chunk % 8 + j];
            }
        }
        k += n;
    }
}

/// The eight 6-bit mins `m` of the 12 packed bytes at `scales` (as `scale_min`), four at a
/// time in a word.
#[inline(always)]
unsafe fn k_mins(scales: *const u8) -> [u8; 8] {
    let word = |at: usize| packed_word(scales, at);
    let low = word(4) & 0x3F3F_3F3F;
    let high = ((word(8) >> 4) & 0x0F0F_0F0F) | ((word(4) >> 2) & 0x3030_3030);
    (u64::from(low) | (u64::from(high) << 32)).to_le_bytes()
}

/// The eight 6-bit scales `sc` of the 12 packed bytes at `scales`, as `k_mins`.
#[inline(always)]
unsafe fn k_scales(scales: *const u8) -> [u8; 8] {
    let word = |at: usize| packed_word(scales, at);
    let low = word(0) & 0x3F3F_3F3F;
    let high = (word(8) & 0x0F0F_0F0F) | ((word(0) >> 2) & 0x3030_3030);
    (u64::from(low) | (u64::from(high) << 32)).to_le_bytes()
}

#[inline(always)]
unsafe fn packed_word(scales: *const u8, at: usize) -> u32 {
    u32::from_le_bytes(std::ptr::read_unaligned(scales.add(at) as *const [u8; 4]))
}

#[inline(always)]
pub(super) unsafe fn f16_scalar<S: Simd16>(p: *const u8) -> f32 {
    S::f16_to_f32(f16_bits(p))
}

#[inline(always)]
unsafe fn f16_bits(p: *const u8) -> u16 {
    u16::from_le_bytes([*p, *p.add(1)])
}

impl IntFormat for Q8_0 {
    const OFFSET: bool = false;
    const SCALE_F16_FIRST: bool = true;
    const SIGNED: bool = true;
    const SPAN: usize = 1;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_load(row.add(chunk * Self::BYTES + 2))
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (f16_scalar::<S>(row.add(chunk * Self::BYTES)), 0.0)
    }
}

impl IntFormat for Q4_0 {
    const OFFSET: bool = false;
    const SCALE_F16_FIRST: bool = true;
    const SIGNED: bool = true;
    const SPAN: usize = 8;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_sub(S::bytes_nibbles16(row.add(chunk * Self::BYTES + 2)), 8)
    }
    #[inline(always)]
    unsafe fn chunk_biased<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        // q - 8 + 128, wrapping.
        S::bytes_sub(S::bytes_nibbles16(row.add(chunk * Self::BYTES + 2)), 136)
    }
    const STORED_BIAS: u8 = 8;
    #[inline(always)]
    unsafe fn chunk_stored<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_nibbles16(row.add(chunk * Self::BYTES + 2))
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (f16_scalar::<S>(row.add(chunk * Self::BYTES)), 0.0)
    }
}

/// The nibbles at `qs` joined with the fifth bits of the little-endian word at `qh`.
#[inline(always)]
unsafe fn five_bit_bytes<S: Simd16>(qh: *const u8, qs: *const u8) -> S::Bytes {
    let word = u32::from_le_bytes([*qh, *qh.add(1), *qh.add(2), *qh.add(3)]);
    S::bytes_or(S::bytes_nibbles16(qs), S::bytes_where_bits(word, 16))
}

impl IntFormat for Q5_0 {
    const OFFSET: bool = false;
    const SCALE_F16_FIRST: bool = true;
    const SIGNED: bool = true;
    const SPAN: usize = 8;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let b = row.add(chunk * Self::BYTES);
        S::bytes_sub(five_bit_bytes::<S>(b.add(2), b.add(6)), 16)
    }
    #[inline(always)]
    unsafe fn chunk_biased<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        // q - 16 + 128, wrapping.
        let b = row.add(chunk * Self::BYTES);
        S::bytes_sub(five_bit_bytes::<S>(b.add(2), b.add(6)), 144)
    }
    const STORED_BIAS: u8 = 16;
    #[inline(always)]
    unsafe fn chunk_stored<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let b = row.add(chunk * Self::BYTES);
        five_bit_bytes::<S>(b.add(2), b.add(6))
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (f16_scalar::<S>(row.add(chunk * Self::BYTES)), 0.0)
    }
}

/// `d` and `m` of a Q4_1/Q5_1 block.
#[inline(always)]
unsafe fn d_m<S: Simd16>(b: *const u8) -> (f32, f32) {
    (f16_scalar::<S>(b), f16_scalar::<S>(b.add(2)))
}

impl IntFormat for Q4_1 {
    const OFFSET: bool = true;
    const SIGNED: bool = false;
    const SPAN: usize = 8;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_nibbles16(row.add(chunk * Self::BYTES + 4))
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        d_m::<S>(row.add(chunk * Self::BYTES))
    }
}

impl IntFormat for Q5_1 {
    const OFFSET: bool = true;
    const SIGNED: bool = false;
    const SPAN: usize = 4;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let b = row.add(chunk * Self::BYTES);
        five_bit_bytes::<S>(b.add(4), b.add(8))
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        d_m::<S>(row.add(chunk * Self::BYTES))
    }
}

/// Q4_K/Q5_K sub-block `j`'s scale `sc` and min `m` as integers.
#[inline(always)]
unsafe fn k_factors(b: *const u8, j: usize) -> (i16, i16) {
    let (sc, m) = scale_min_ints(b.add(4), j);
    (sc.into(), m.into())
}

/// `d` and `-(dmin * m)` of Q4_K/Q5_K sub-block `j`.
#[inline(always)]
unsafe fn k_scale_offset<S: Simd16>(b: *const u8, j: usize) -> (f32, f32) {
    let (_, m) = scale_min(b.add(4), j);
    (f16_scalar::<S>(b), -(f16_scalar::<S>(b.add(2)) * m))
}

/// Q4_K/Q5_K chunks' factors (`sc`, both halves), scale (`d`) and offset (`-(dmin * m)`).
macro_rules! k_quant_scales {
    () => {
        const FACTORS: Factors = Factors::PerChunk;
        #[inline(always)]
        unsafe fn factors(row: *const u8, chunk: usize) -> [i16; 2] {
            let (sc, _) = k_factors(row.add((chunk / 8) * Self::BYTES), chunk % 8);
            [sc, sc]
        }
        #[inline(always)]
        unsafe fn half_factors(row: *const u8, first: usize) -> [i8; 16] {
            // `first` starts a super-block (the callers' groups do).
            let sc = k_scales(row.add((first / 8) * Self::BYTES + 4));
            std::array::from_fn(|i| sc[i / 2] as i8)
        }
        #[inline(always)]
        unsafe fn super_block_fields(block: *const u8) -> Option<SuperBlockFields> {
            Some(SuperBlockFields {
                d: f16_bits(block),
                dmin: f16_bits(block.add(2)),
                scales: u64::from_le_bytes(k_scales(block.add(4))),
                mins: u64::from_le_bytes(k_mins(block.add(4))),
            })
        }
        #[inline(always)]
        unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
            k_scale_offset::<S>(row.add((chunk / 8) * Self::BYTES), chunk % 8)
        }
        #[inline(always)]
        unsafe fn scales_into<S: Simd16>(
            row: *const u8,
            first: usize,
            count: usize,
            scale: *mut f32,
            offset: *mut f32,
        ) {
            super_block_scales_into::<S, 0>(
                BlockOffsets::KMins,
                row,
                Self::BYTES,
                first,
                count,
                scale,
                offset,
            )
        }
    };
}

impl IntFormat for Q4K {
    const OFFSET: bool = true;
    const SIGNED: bool = false;
    const SPAN: usize = 8;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let (b, j) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        S::bytes_bits(
            S::bytes_load(b.add(16 + (j / 2) * 32)),
            4 * (j as u32 % 2),
            15,
        )
    }
    k_quant_scales!();
}

impl IntFormat for Q5K {
    const OFFSET: bool = true;
    const SIGNED: bool = false;
    const SPAN: usize = 4;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let (b, j) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let low = S::bytes_bits(
            S::bytes_load(b.add(48 + (j / 2) * 32)),
            4 * (j as u32 % 2),
            15,
        );
        let high = S::bytes_high(S::bytes_load(b.add(16)), j as u32, 1);
        S::bytes_or(low, high)
    }
    k_quant_scales!();
}

impl IntFormat for Q6K {
    const OFFSET: bool = false;
    const SIGNED: bool = true;
    const SPAN: usize = 4;
    const FACTORS: Factors = Factors::PerHalf;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_sub(Self::chunk_stored::<S>(row, chunk), 32)
    }
    const STORED_BIAS: u8 = 32;
    #[inline(always)]
    unsafe fn chunk_stored<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let (h, r) = (g / 4, g % 4);
        let low = S::bytes_bits(
            S::bytes_load(b.add(h * 64 + (r % 2) * 32)),
            4 * (r as u32 / 2),
            15,
        );
        let high = S::bytes_high(S::bytes_load(b.add(128 + h * 32)), 2 * r as u32, 2);
        S::bytes_or(low, high)
    }
    #[inline(always)]
    unsafe fn factors(row: *const u8, chunk: usize) -> [i16; 2] {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let scales = b.add(192) as *const i8;
        [
            i16::from(*scales.add(2 * g)),
            i16::from(*scales.add(2 * g + 1)),
        ]
    }
    #[inline(always)]
    unsafe fn half_factors(row: *const u8, first: usize) -> [i8; 16] {
        // `first` starts a super-block, whose 16 scales are the halves' factors in order.
        std::ptr::read_unaligned(row.add((first / 8) * Self::BYTES + 192) as *const [i8; 16])
    }
    #[inline(always)]
    unsafe fn super_block_fields(block: *const u8) -> Option<SuperBlockFields> {
        Some(SuperBlockFields {
            d: f16_bits(block.add(208)),
            ..SuperBlockFields::default()
        })
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (
            f16_scalar::<S>(row.add((chunk / 8) * Self::BYTES + 208)),
            0.0,
        )
    }
    #[inline(always)]
    unsafe fn scales_into<S: Simd16>(
        row: *const u8,
        first: usize,
        count: usize,
        scale: *mut f32,
        offset: *mut f32,
    ) {
        super_block_scales_into::<S, 208>(
            BlockOffsets::None,
            row,
            Self::BYTES,
            first,
            count,
            scale,
            offset,
        )
    }
}

/// Q3_K's three bits are `q + 4` as stored (the bit in `hmask` is set where `q >= 0`), its
/// sixteen sub-block scales the factors of the chunks' halves, as Q6_K's are.
impl IntFormat for Q3K {
    const OFFSET: bool = false;
    const SIGNED: bool = true;
    // One half chunk's vectors: their sums widen with that half's factor.
    const SPAN: usize = 4;
    const FACTORS: Factors = Factors::PerHalf;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_sub(Self::chunk_stored::<S>(row, chunk), 4)
    }
    const STORED_BIAS: u8 = 4;
    #[inline(always)]
    unsafe fn chunk_stored<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        let low = S::bytes_bits(
            S::bytes_load(b.add(32 + (g / 4) * 32)),
            2 * (g as u32 % 4),
            3,
        );
        let high = S::bytes_moved(S::bytes_load(b), g as u32, 1, 2);
        S::bytes_or(low, high)
    }
    #[inline(always)]
    unsafe fn factors(row: *const u8, chunk: usize) -> [i16; 2] {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        [
            i16::from(q3k_scale(b.add(96), 2 * g)),
            i16::from(q3k_scale(b.add(96), 2 * g + 1)),
        ]
    }
    #[inline(always)]
    unsafe fn half_factors(row: *const u8, first: usize) -> [i8; 16] {
        // `first` starts a super-block, whose 16 scales are the halves' factors in order.
        let scales = row.add((first / 8) * Self::BYTES + 96);
        std::array::from_fn(|k| q3k_scale(scales, k))
    }
    #[inline(always)]
    unsafe fn super_block_fields(block: *const u8) -> Option<SuperBlockFields> {
        Some(SuperBlockFields {
            d: f16_bits(block.add(108)),
            ..SuperBlockFields::default()
        })
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (
            f16_scalar::<S>(row.add((chunk / 8) * Self::BYTES + 108)),
            0.0,
        )
    }
    #[inline(always)]
    unsafe fn scales_into<S: Simd16>(
        row: *const u8,
        first: usize,
        count: usize,
        scale: *mut f32,
        offset: *mut f32,
    ) {
        super_block_scales_into::<S, 108>(
            BlockOffsets::None,
            row,
            Self::BYTES,
            first,
            count,
            scale,
            offset,
        )
    }
}

/// Q2_K's two bits are `q` (unsigned); its sixteen sub-block scale bytes hold the factors
/// of the chunks' halves (low nibbles) and their mins (high nibbles): offsets per half chunk.
impl IntFormat for Q2K {
    const OFFSET: bool = true;
    const SIGNED: bool = false;
    // One half chunk's vectors: their sums widen with that half's factor.
    const SPAN: usize = 4;
    const FACTORS: Factors = Factors::PerHalf;
    const HALF_MINS: bool = true;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        S::bytes_bits(
            S::bytes_load(b.add(16 + (g / 4) * 32)),
            2 * (g as u32 % 4),
            3,
        )
    }
    #[inline(always)]
    unsafe fn factors(row: *const u8, chunk: usize) -> [i16; 2] {
        let (b, g) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        [
            i16::from(*b.add(2 * g) & 15),
            i16::from(*b.add(2 * g + 1) & 15),
        ]
    }
    #[inline(always)]
    unsafe fn half_factors(row: *const u8, first: usize) -> [i8; 16] {
        // `first` starts a super-block, whose 16 scale bytes are its halves' in order.
        q2k_scale_bytes(row.add((first / 8) * Self::BYTES)).map(|b| (b & 15) as i8)
    }
    #[inline(always)]
    unsafe fn half_mins(row: *const u8, first: usize) -> [u8; 16] {
        q2k_scale_bytes(row.add((first / 8) * Self::BYTES)).map(|b| b >> 4)
    }
    #[inline(always)]
    unsafe fn super_block_fields(block: *const u8) -> Option<SuperBlockFields> {
        Some(SuperBlockFields {
            d: f16_bits(block.add(80)),
            dmin: f16_bits(block.add(82)),
            // Every chunk's offset is `-(dmin * 1)`: the mins are the halves' (`half_mins`).
            mins: 0x0101_0101_0101_0101,
            ..SuperBlockFields::default()
        })
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        let b = row.add((chunk / 8) * Self::BYTES);
        (f16_scalar::<S>(b.add(80)), -f16_scalar::<S>(b.add(82)))
    }
    #[inline(always)]
    unsafe fn scales_into<S: Simd16>(
        row: *const u8,
        first: usize,
        count: usize,
        scale: *mut f32,
        offset: *mut f32,
    ) {
        super_block_scales_into::<S, 80>(
            BlockOffsets::Dmin,
            row,
            Self::BYTES,
            first,
            count,
            scale,
            offset,
        )
    }
}

/// IQ4_NL's integers are its nibbles' values: signed, up to 127 in magnitude (as Q8_0's).
impl IntFormat for IQ4NL {
    const OFFSET: bool = false;
    const SCALE_F16_FIRST: bool = true;
    const SIGNED: bool = true;
    const SPAN: usize = 1;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        S::bytes_lookup16(
            S::bytes_nibbles16(row.add(chunk * Self::BYTES + 2)),
            &IQ4_VALUES,
        )
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (f16_scalar::<S>(row.add(chunk * Self::BYTES)), 0.0)
    }
}

/// IQ4_XS as IQ4_NL, each chunk's scale `d * scale` (exact, so no integer factors).
impl IntFormat for IQ4XS {
    const OFFSET: bool = false;
    const SIGNED: bool = true;
    const SPAN: usize = 1;
    #[inline(always)]
    unsafe fn chunk_q<S: Simd16>(row: *const u8, chunk: usize) -> S::Bytes {
        let (b, j) = (row.add((chunk / 8) * Self::BYTES), chunk % 8);
        S::bytes_lookup16(S::bytes_nibbles16(b.add(8 + 16 * j)), &IQ4_VALUES)
    }
    #[inline(always)]
    unsafe fn scale_offset<S: Simd16>(row: *const u8, chunk: usize) -> (f32, f32) {
        (
            iq4xs_scale::<S>(row.add((chunk / 8) * Self::BYTES), chunk % 8),
            0.0,
        )
    }
}

/// The sixteen scale bytes at the start of the Q2_K super-block at `block`.
#[inline(always)]
unsafe fn q2k_scale_bytes(block: *const u8) -> [u8; 16] {
    std::ptr::read_unaligned(block as *const [u8; 16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_bytes(len: usize, mut seed: u32) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn packed_k_scales_and_mins_by_words_match_the_bytewise_decoding() {
        for seed in 0..500 {
            let packed = random_bytes(12, seed);
            // SAFETY: 12 bytes, what all three read.
            let (scales, mins) = unsafe { (k_scales(packed.as_ptr()), k_mins(packed.as_ptr())) };
            for j in 0..8 {
                let (sc, m) = unsafe { scale_min_ints(packed.as_ptr(), j) };
                assert_eq!((scales[j], mins[j]), (sc, m), "sub-block {j} of {packed:?}");
            }
        }
    }

    fn half_factors_are_the_chunks_factors<F: IntFormat>() {
        for seed in 0..50 {
            let row = random_bytes(2 * F::BYTES, seed);
            for first in [0, 8] {
                // SAFETY: the row holds chunks 0-15.
                let halves = unsafe { F::half_factors(row.as_ptr(), first) };
                for c in 0..8 {
                    let [lo, hi] = unsafe { F::factors(row.as_ptr(), first + c) };
                    let got = [i16::from(halves[2 * c]), i16::from(halves[2 * c + 1])];
                    assert_eq!(got, [lo, hi], "chunk {}", first + c);
                }
            }
        }
    }

    #[test]
    fn half_factors_of_k_quants_are_their_chunks_factors() {
        half_factors_are_the_chunks_factors::<Q4K>();
        half_factors_are_the_chunks_factors::<Q5K>();
        half_factors_are_the_chunks_factors::<Q6K>();
        half_factors_are_the_chunks_factors::<Q3K>();
        half_factors_are_the_chunks_factors::<Q2K>();
    }

    #[test]
    fn q2_k_half_mins_are_the_high_nibbles_of_its_scale_bytes() {
        let row = random_bytes(2 * Q2K::BYTES, 7);
        for first in [0, 8] {
            // SAFETY: the row holds chunks 0-15.
            let mins = unsafe { Q2K::half_mins(row.as_ptr(), first) };
            let block = &row[(first / 8) * Q2K::BYTES..];
            for (k, &m) in mins.iter().enumerate() {
                assert_eq!(m, block[k] >> 4, "sub-block {k} of block {}", first / 8);
            }
        }
    }
}
