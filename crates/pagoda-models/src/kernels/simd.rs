//! Sixteen f32 lanes, as one AVX-512 register, two AVX2 registers or a plain array. Kernels
//! are written once against `Simd16` and compiled per path inside a `#[target_feature]` entry
//! point (`dispatch!`), so every path performs the same operations in the same order: each
//! lane's value is the same chain of fused multiply-adds, and results agree bit for bit
//! across paths, tile shapes and batch sizes.

use half::{bf16, f16};

pub const LANES: usize = 16;

/// Where a chunk's codebook row indices lie (IQ2, IQ3): index `k` is field `k` of `low`
/// (`low_bits` 8: bytes, 16: little-endian u16, 0: none) shifted right by `low_shift` and
/// and-ed with `low_mask`, or-ed with `high_bits` bits of `high` from bit `high_stride * k`,
/// moved up to bit `high_at`. Each type's layout is constant, so it folds into the kernels.
#[derive(Clone, Copy)]
pub struct RowIndex {
    low: *const u8,
    low_bits: u32,
    low_shift: u32,
    low_mask: u32,
    high: u32,
    high_stride: u32,
    high_bits: u32,
    high_at: u32,
}

impl RowIndex {
    const NONE: RowIndex = RowIndex {
        low: std::ptr::null(),
        low_bits: 0,
        low_shift: 0,
        low_mask: 0,
        high: 0,
        high_stride: 0,
        high_bits: 0,
        high_at: 0,
    };

    /// Index `k` is byte `k` at `low`.
    pub fn bytes(low: *const u8) -> Self {
        RowIndex {
            low,
            low_bits: 8,
            low_mask: 255,
            ..Self::NONE
        }
    }

    /// Index `k` is `(u16 k at low >> shift) & mask`.
    pub fn halves(low: *const u8, shift: u32, mask: u32) -> Self {
        RowIndex {
            low,
            low_bits: 16,
            low_shift: shift,
            low_mask: mask,
            ..Self::NONE
        }
    }

    /// Index `k` is the `bits` bits of `word` from bit `stride * k`.
    pub fn fields(word: u32, stride: u32, bits: u32) -> Self {
        RowIndex {
            high: word,
            high_stride: stride,
            high_bits: bits,
            ..Self::NONE
        }
    }

    /// These indices with the `bits` bits of `high` from bit `stride * k` above bit 8.
    pub fn above(self, high: u32, stride: u32, bits: u32) -> Self {
        RowIndex {
            high,
            high_stride: stride,
            high_bits: bits,
            high_at: 8,
            ..self
        }
    }

    /// Index `k`, read in scalar code.
    ///
    /// # Safety
    /// `low` holds field `k`.
    #[inline(always)]
    pub unsafe fn at(&self, k: usize) -> usize {
        let low = match self.low_bits {
            0 => 0,
            8 => u32::from(*self.low.add(k)),
            _ => u32::from(u16::from_le_bytes([
                *self.low.add(2 * k),
                *self.low.add(2 * k + 1),
            ])),
        };
        let high = (self.high >> (self.high_stride * k as u32)) & ((1 << self.high_bits) - 1);
        (((low >> self.low_shift) & self.low_mask) | (high << self.high_at)) as usize
    }

    /// Whether each index is put together from a field of `low` and bits of `high`.
    pub fn is_split(&self) -> bool {
        self.low_bits != 0 && self.high_bits != 0
    }

    /// The largest index the layout can hold.
    pub fn max(&self) -> usize {
        let low = if self.low_bits == 0 { 0 } else { self.low_mask };
        (low | (((1 << self.high_bits) - 1) << self.high_at)) as usize
    }
}

/// # Safety
/// Every method may use instructions of its path: call them only from code compiled for that
/// path (inside `dispatch!`) on a CPU that has it. Pointers must point at 16 readable (or
/// writable) elements.
pub trait Simd16: Copy {
    /// How many values of `Self` fit in the vector registers (sizes the kernels' tiles).
    const REGISTERS: usize;
    unsafe fn zero() -> Self;
    unsafe fn splat(v: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn load_f16(p: *const f16) -> Self;
    unsafe fn load_bf16(p: *const bf16) -> Self;
    /// `a * b + c`, rounded once.
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    unsafe fn mul(a: Self, b: Self) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    unsafe fn sub(a: Self, b: Self) -> Self;
    /// `a / b`, correctly rounded (so the same bits on every path).
    unsafe fn div(a: Self, b: Self) -> Self;
    /// 16 signed bytes as f32 (quantized weights).
    unsafe fn load_i8(p: *const i8) -> Self;
    /// `(byte >> shift) & mask` of 16 bytes, as f32: the bit fields of packed quants.
    unsafe fn load_u8_bits(p: *const u8, shift: u32, mask: i32) -> Self;
    /// One f16 (its bits) widened into every lane. A broadcast of the 16 bits, then a
    /// widening: `half`'s conversion checks the CPU at every call, and LLVM turns a scalar
    /// widening into an insert that waits for whatever the register last held (the
    /// accumulators, which serialised the quantized matmul).
    unsafe fn splat_f16(bits: u16) -> Self;
    /// `self + v` in the lanes whose bit of `word` is set, `self` elsewhere: the fifth
    /// bits of Q5_0/Q5_1 blocks (one masked add on AVX-512).
    unsafe fn add_where_bits(self, word: u32, v: f32) -> Self;
    /// The low and the high nibbles of 16 bytes, as f32.
    unsafe fn load_u8_nibbles(p: *const u8) -> (Self, Self);
    /// The 32 values of a Q5_0/Q5_1 block before scaling (small integers, exact in f32): the
    /// low nibbles of the 16 bytes at `qs` (values 0-15) and their high nibbles (16-31), plus
    /// 16 where bit `i` of `word` is set.
    #[inline(always)]
    unsafe fn five_bit_values(qs: *const u8, word: u32) -> (Self, Self) {
        let (lo, hi) = Self::load_u8_nibbles(qs);
        (
            lo.add_where_bits(word, 16.0),
            hi.add_where_bits(word >> 16, 16.0),
        )
    }
    /// `(byte >> shift) & 15` of the 32 bytes at `p`, as f32: a Q4_K chunk's values.
    #[inline(always)]
    unsafe fn nibbles32(p: *const u8, shift: u32) -> (Self, Self) {
        (
            Self::load_u8_bits(p, shift, 15),
            Self::load_u8_bits(p.add(16), shift, 15),
        )
    }
    /// The 32 values of a Q6_K chunk less 32 (small integers, exact in f32): value `i` has
    /// low bits `(ql[i] >> lo_shift) & 15` and high bits `(qh[i] >> hi_shift) & 3`.
    #[inline(always)]
    unsafe fn six_bit_values(
        ql: *const u8,
        qh: *const u8,
        lo_shift: u32,
        hi_shift: u32,
    ) -> (Self, Self) {
        let (sixteen, offset) = (Self::splat(16.0), Self::splat(32.0));
        let lo = Self::fma(
            Self::load_u8_bits(qh, hi_shift, 3),
            sixteen,
            Self::load_u8_bits(ql, lo_shift, 15),
        );
        let hi = Self::fma(
            Self::load_u8_bits(qh.add(16), hi_shift, 3),
            sixteen,
            Self::load_u8_bits(ql.add(16), lo_shift, 15),
        );
        (Self::sub(lo, offset), Self::sub(hi, offset))
    }
    /// 32 bytes in registers: a chunk of quantized weights before its integer products.
    type Bytes: Copy;
    /// A chunk's integers ready for products (on x86 their magnitudes and signed values).
    type Prep: Copy;
    /// Four chunks' exact integer totals.
    type Quad: Copy;
    /// Sixteen i32 lanes: lane `k` an exact integer total of chunk `k` of a group of 16.
    type Ints: Copy;
    /// 64 bytes holding four bytes of each of 16 chunks (bytes `4 k..4 k + 4`: chunk `k`),
    /// the layout prefill multiplies in.
    type Wide: Copy;
    unsafe fn bytes_load(p: *const u8) -> Self::Bytes;
    /// The 16 bytes at `p`: their low nibbles (bytes 0-15), then their high ones (16-31).
    unsafe fn bytes_nibbles16(p: *const u8) -> Self::Bytes;
    /// `(b >> shift) & mask` per byte.
    unsafe fn bytes_bits(b: Self::Bytes, shift: u32, mask: u8) -> Self::Bytes;
    /// Bits `bit..bit + count` of each byte moved to bits `4..4 + count`, the rest zero
    /// (`bit + count <= 8`, `count <= 4`): a fifth or sixth bit in place to be or-ed on.
    unsafe fn bytes_high(b: Self::Bytes, bit: u32, count: u32) -> Self::Bytes;
    /// Bits `bit..bit + count` of each byte moved to bits `to..to + count`, the rest zero
    /// (`bit + count <= 8`, `to + count <= 8`): Q3_K's third bit.
    unsafe fn bytes_moved(b: Self::Bytes, bit: u32, count: u32, to: u32) -> Self::Bytes;
    /// `a | b` per byte.
    unsafe fn bytes_or(a: Self::Bytes, b: Self::Bytes) -> Self::Bytes;
    /// `table[b]` per byte (each below 16): IQ4's nibbles to their values.
    unsafe fn bytes_lookup16(b: Self::Bytes, table: &[u8; 16]) -> Self::Bytes;
    /// `b - v` per byte, wrapping (values become signed).
    unsafe fn bytes_sub(b: Self::Bytes, v: u8) -> Self::Bytes;
    /// `v` in byte `i` where bit `i` of `word` is set, 0 elsewhere.
    unsafe fn bytes_where_bits(word: u32, v: u8) -> Self::Bytes;
    /// `|b|` per byte, `b` signed (`-128` stays `0x80`, 128 unsigned).
    unsafe fn bytes_abs(b: Self::Bytes) -> Self::Bytes;
    /// `b` per byte negated where `signs` is negative, zero where it is zero (`vpsignb`).
    unsafe fn bytes_sign(b: Self::Bytes, signs: Self::Bytes) -> Self::Bytes;
    unsafe fn bytes_zero() -> Self::Bytes;
    /// Eight four-byte codebook rows (row `k` in bytes `4 k..4 k + 4`) at `index`'s eight
    /// indices.
    ///
    /// # Safety
    /// `index.max() < table.len()`; `index.low` as `RowIndex::at`.
    unsafe fn bytes_rows4(table: &[u32], index: RowIndex) -> Self::Bytes;
    /// Sixteen i16 lanes, 0-7 `lo` and 8-15 `hi`: the integer factors of a chunk's values
    /// 0-15 and 16-31.
    unsafe fn int_halves(lo: i16, hi: i16) -> Self::Bytes;
    /// A chunk (signed bytes when `signed`, else bytes below 128) for `quad_dots`.
    unsafe fn prep(w: Self::Bytes, signed: bool) -> Self::Prep;
    /// A prepared chunk's magnitudes to `abs` and its values to `values` (32 bytes each).
    unsafe fn prep_store(w: Self::Prep, abs: *mut u8, values: *mut u8);
    /// Chunk `k`'s total `sum(s_k(i) * w_k[i] * x[32 k + i])` over its 32 values, `s_k` the
    /// i16 factors `scales[k]` of `int_halves`. `x` holds 128 signed bytes in -127..=127:
    /// no product, pair sum or total overflows (`|w| <= 128`, `|s| <= 128`).
    unsafe fn quad_dots(
        w: [Self::Prep; 4],
        scales: [Self::Bytes; 4],
        x: *const i8,
        signed: bool,
    ) -> Self::Quad;
    /// `quad_dots` by `vpdpbusd` (only the `-vnni` paths and the scalar one may call it), with
    /// chunk `k`'s factors `factors[k]` (values 0-15, 16-31) applied to its two half totals
    /// when `scaled`, else 1.
    unsafe fn quad_dots_vnni(
        w: [Self::Prep; 4],
        factors: [[i16; 2]; 4],
        x: *const i8,
        signed: bool,
        scaled: bool,
    ) -> Self::Quad;
    /// `q[k] - 128 * sums[k]` for the four floats at `sums` (integers): the totals of weights
    /// stored plus 128 as unsigned bytes back to those of the signed weights.
    unsafe fn quad_unbias(q: Self::Quad, sums: *const f32) -> Self::Quad;
    /// Quad `q`'s totals in lanes `4 q..4 q + 4`.
    unsafe fn ints_from_quads(q: [Self::Quad; 4]) -> Self::Ints;
    unsafe fn ints_zero() -> Self::Ints;
    unsafe fn quad_zero() -> Self::Quad;
    /// The lanes as f32 (exact below 2^24).
    unsafe fn ints_f32(i: Self::Ints) -> Self;
    unsafe fn wide_load(p: *const u8) -> Self::Wide;
    unsafe fn wide_zero() -> Self::Wide;
    /// Sixteen-bit sums of pairs of products: i16 lane `p` is
    /// `w[2 p] * x[2 p] + w[2 p + 1] * x[2 p + 1]`. `w_abs` holds the magnitudes of `w` (`w`
    /// itself when not `signed`); `x` 64 signed bytes in -127..=127.
    unsafe fn wide_products(
        w_abs: Self::Wide,
        w: Self::Wide,
        x: *const i8,
        signed: bool,
    ) -> Self::Wide;
    /// i16 lanes added (the caller keeps the sums below 2^15).
    unsafe fn wide_add16(a: Self::Wide, b: Self::Wide) -> Self::Wide;
    /// `acc` plus, in lane `k`, the i16 pair sums of bytes `4 k..4 k + 4` times their i16
    /// factors in `factors`.
    unsafe fn wide_widen(acc: Self::Ints, sums: Self::Wide, factors: Self::Wide) -> Self::Ints;
    /// `acc` plus, in lane `k`, `sum(u[b] * s[b])` over bytes `4 k..4 k + 4`, `u` unsigned and
    /// `s` signed bytes (`vpdpbusd`: only the `-vnni` paths and the scalar one may call it).
    unsafe fn wide_dot(acc: Self::Ints, u: Self::Wide, s: Self::Wide) -> Self::Ints;
    /// Signed bytes plus 128, as unsigned bytes.
    unsafe fn wide_bias(x: Self::Wide) -> Self::Wide;
    unsafe fn ints_load(p: *const i32) -> Self::Ints;
    unsafe fn ints_store(i: Self::Ints, p: *mut i32);
    /// Per lane, wrapping.
    unsafe fn ints_add(a: Self::Ints, b: Self::Ints) -> Self::Ints;
    /// Per lane, wrapping.
    unsafe fn ints_sub(a: Self::Ints, b: Self::Ints) -> Self::Ints;
    /// Per lane, the low 32 bits of the product.
    unsafe fn ints_mul(a: Self::Ints, b: Self::Ints) -> Self::Ints;
    /// One f16 (its bits) as f32.
    unsafe fn f16_to_f32(bits: u16) -> f32;
    /// `a > b ? a : b` per lane (x86 `max` semantics, NaN included, on every path).
    unsafe fn max(a: Self, b: Self) -> Self;
    /// Rounds to the nearest integer, ties to even.
    unsafe fn round(self) -> Self;
    /// `2^n` for lanes holding integers in -126..=127.
    unsafe fn pow2i(self) -> Self;
    unsafe fn store(self, p: *mut f32);
    /// The lanes' sum by the fixed tree of `reduce_lanes` (the same bits).
    #[inline(always)]
    unsafe fn reduce(self) -> f32 {
        let mut lanes = [0.0f32; LANES];
        self.store(lanes.as_mut_ptr());
        reduce_lanes(&lanes)
    }
    /// Sixteen chunks of 32 bytes to the `wide` layout: 8 lines of 64 bytes at `lines`,
    /// bytes `4 v..4 v + 4` of chunk `k` at `64 v + 4 k`.
    #[inline(always)]
    unsafe fn chunks_to_lines(chunks: &[[u8; 32]; 16], lines: *mut u8) {
        for (k, chunk) in chunks.iter().enumerate() {
            for v in 0..8 {
                let word = std::ptr::read_unaligned(chunk.as_ptr().add(4 * v) as *const u32);
                std::ptr::write_unaligned(lines.add(64 * v + 4 * k) as *mut u32, word);
            }
        }
    }

    /// Clamps to -87..=88, where `exp` keeps `2^n` a normal number.
    #[inline(always)]
    unsafe fn min_max_clamp(self) -> Self {
        let low = Self::max(self, Self::splat(-87.0));
        // min(low, 88) as a max of negations, so only `max` semantics are needed.
        let neg = Self::mul(low, Self::splat(-1.0));
        Self::mul(Self::max(neg, Self::splat(-88.0)), Self::splat(-1.0))
    }
}

/// `e^x` per lane from exactly rounded operations only, so every path gets the same bits:
/// `x = n ln2 + r` with `n` an integer and `|r| <= ln2 / 2`, a degree-7 polynomial for `e^r`
/// (Cephes' expf coefficients), times `2^n`. Relative error about 2e-7; inputs below -87
/// give about 1.6e-38 instead of smaller values (attention only uses `x <= 0`).
#[inline(always)]
pub unsafe fn exp<S: Simd16>(x: S) -> S {
    let x = S::min_max_clamp(x);
    let n = S::mul(x, S::splat(std::f32::consts::LOG2_E)).round();
    let r = S::fma(n, S::splat(-0.693_359_4), x);
    let r = S::fma(n, S::splat(2.121_944_4e-4), r);
    let mut p = S::splat(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = S::fma(p, r, S::splat(c));
    }
    let y = S::add(S::fma(p, S::mul(r, r), r), S::splat(1.0));
    S::mul(y, n.pow2i())
}

/// The fixed sum of 16 partial sums: halves added pairwise, four times.
#[inline(always)]
pub fn reduce_lanes(lanes: &[f32; LANES]) -> f32 {
    let mut v = *lanes;
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            v[l] += v[l + width];
        }
        width /= 2;
    }
    v[0]
}

/// Asks for the cache line at `p` ahead of use (a hint: never faults, any address).
#[inline(always)]
pub fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it reads nothing architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Asks for the cache line at `p` into L2 only (a hint, as `prefetch`).
#[inline(always)]
pub fn prefetch_l2(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as `prefetch`.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Whether the CPU is Intel's (CPUID leaf 0's vendor string), for tunings measured per vendor.
pub fn is_intel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let leaf0 = std::arch::x86_64::__cpuid(0);
        // "GenuineIntel" in EBX, EDX, ECX.
        (leaf0.ebx, leaf0.edx, leaf0.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e)
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// An element the kernels widen to f32: weights and KV-cache entries.
pub trait Elem: Copy + Send + Sync + 'static {
    /// Already f32: kernels may read it in place instead of widening a copy.
    const IS_F32: bool = false;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
    /// # Safety
    /// As `Simd16`.
    unsafe fn load<S: Simd16>(p: *const Self) -> S;
}

impl Elem for f32 {
    const IS_F32: bool = true;
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    unsafe fn load<S: Simd16>(p: *const Self) -> S {
        S::load(p)
    }
}

impl Elem for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    #[inline(always)]
    unsafe fn load<S: Simd16>(p: *const Self) -> S {
        S::load_f16(p)
    }
}

impl Elem for bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
    #[inline(always)]
    unsafe fn load<S: Simd16>(p: *const Self) -> S {
        S::load_bf16(p)
    }
}

/// A weight byte as the integer it stands for.
#[inline(always)]
fn weight(signed: bool, b: u8) -> i32 {
    if signed {
        i32::from(b as i8)
    } else {
        i32::from(b)
    }
}

/// The reference path: plain arrays, `f32::mul_add` for the fused multiply-add.
#[derive(Clone, Copy)]
pub struct Scalar([f32; LANES]);

impl Simd16 for Scalar {
    const REGISTERS: usize = 4;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Scalar([0.0; LANES])
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        Scalar([v; LANES])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Scalar(std::ptr::read_unaligned(p as *const [f32; LANES]))
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        Scalar(std::array::from_fn(|l| (*p.add(l)).to_f32()))
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const bf16) -> Self {
        Scalar(std::array::from_fn(|l| (*p.add(l)).to_f32()))
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        Scalar(std::array::from_fn(|l| a.0[l].mul_add(b.0[l], c.0[l])))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        Scalar(std::array::from_fn(|l| a.0[l] * b.0[l]))
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        Scalar(std::array::from_fn(|l| a.0[l] + b.0[l]))
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        Scalar(std::array::from_fn(|l| a.0[l] - b.0[l]))
    }
    #[inline(always)]
    unsafe fn div(a: Self, b: Self) -> Self {
        Scalar(std::array::from_fn(|l| a.0[l] / b.0[l]))
    }
    #[inline(always)]
    unsafe fn load_i8(p: *const i8) -> Self {
        Scalar(std::array::from_fn(|l| *p.add(l) as f32))
    }
    #[inline(always)]
    unsafe fn splat_f16(bits: u16) -> Self {
        Scalar([f16::from_bits(bits).to_f32(); LANES])
    }
    #[inline(always)]
    unsafe fn add_where_bits(self, word: u32, v: f32) -> Self {
        Scalar(std::array::from_fn(|l| {
            if (word >> l) & 1 == 1 {
                self.0[l] + v
            } else {
                self.0[l]
            }
        }))
    }
    #[inline(always)]
    unsafe fn load_u8_nibbles(p: *const u8) -> (Self, Self) {
        (
            Scalar(std::array::from_fn(|l| (*p.add(l) & 15) as f32)),
            Scalar(std::array::from_fn(|l| (*p.add(l) >> 4) as f32)),
        )
    }
    #[inline(always)]
    unsafe fn load_u8_bits(p: *const u8, shift: u32, mask: i32) -> Self {
        Scalar(std::array::from_fn(|l| {
            ((i32::from(*p.add(l)) >> shift) & mask) as f32
        }))
    }
    type Bytes = [u8; 32];
    type Prep = [u8; 32];
    type Quad = [i32; 4];
    type Ints = [i32; 16];
    type Wide = [u8; 64];
    #[inline(always)]
    unsafe fn bytes_load(p: *const u8) -> Self::Bytes {
        std::ptr::read_unaligned(p as *const [u8; 32])
    }
    #[inline(always)]
    unsafe fn bytes_nibbles16(p: *const u8) -> Self::Bytes {
        std::array::from_fn(|i| {
            if i < 16 {
                *p.add(i) & 15
            } else {
                *p.add(i - 16) >> 4
            }
        })
    }
    #[inline(always)]
    unsafe fn bytes_bits(b: Self::Bytes, shift: u32, mask: u8) -> Self::Bytes {
        b.map(|v| (v >> shift) & mask)
    }
    #[inline(always)]
    unsafe fn bytes_high(b: Self::Bytes, bit: u32, count: u32) -> Self::Bytes {
        b.map(|v| ((v >> bit) & ((1 << count) - 1)) << 4)
    }
    #[inline(always)]
    unsafe fn bytes_moved(b: Self::Bytes, bit: u32, count: u32, to: u32) -> Self::Bytes {
        b.map(|v| ((v >> bit) & ((1 << count) - 1)) << to)
    }
    #[inline(always)]
    unsafe fn bytes_or(a: Self::Bytes, b: Self::Bytes) -> Self::Bytes {
        std::array::from_fn(|i| a[i] | b[i])
    }
    #[inline(always)]
    unsafe fn bytes_lookup16(b: Self::Bytes, table: &[u8; 16]) -> Self::Bytes {
        b.map(|v| table[usize::from(v & 15)])
    }
    #[inline(always)]
    unsafe fn bytes_sub(b: Self::Bytes, v: u8) -> Self::Bytes {
        b.map(|x| x.wrapping_sub(v))
    }
    #[inline(always)]
    unsafe fn bytes_where_bits(word: u32, v: u8) -> Self::Bytes {
        std::array::from_fn(|i| if (word >> i) & 1 == 1 { v } else { 0 })
    }
    #[inline(always)]
    unsafe fn bytes_abs(b: Self::Bytes) -> Self::Bytes {
        b.map(|v| (v as i8).unsigned_abs())
    }
    #[inline(always)]
    unsafe fn bytes_sign(b: Self::Bytes, signs: Self::Bytes) -> Self::Bytes {
        std::array::from_fn(|i| match (signs[i] as i8).signum() {
            -1 => b[i].wrapping_neg(),
            0 => 0,
            _ => b[i],
        })
    }
    #[inline(always)]
    unsafe fn bytes_rows4(table: &[u32], index: RowIndex) -> Self::Bytes {
        std::array::from_fn(|i| table[index.at(i / 4)].to_le_bytes()[i % 4])
    }
    #[inline(always)]
    unsafe fn bytes_zero() -> Self::Bytes {
        [0; 32]
    }
    #[inline(always)]
    unsafe fn int_halves(lo: i16, hi: i16) -> Self::Bytes {
        std::array::from_fn(|i| {
            let s = if i < 16 { lo } else { hi };
            s.to_le_bytes()[i % 2]
        })
    }
    #[inline(always)]
    unsafe fn prep(w: Self::Bytes, _signed: bool) -> Self::Prep {
        w
    }
    #[inline(always)]
    unsafe fn prep_store(w: Self::Prep, abs: *mut u8, values: *mut u8) {
        // Unsigned chunks' bytes are below 128: their magnitudes are themselves.
        std::ptr::write_unaligned(abs as *mut [u8; 32], w.map(|b| (b as i8).unsigned_abs()));
        std::ptr::write_unaligned(values as *mut [u8; 32], w);
    }
    #[inline(always)]
    unsafe fn quad_dots(
        w: [Self::Prep; 4],
        scales: [Self::Bytes; 4],
        x: *const i8,
        signed: bool,
    ) -> Self::Quad {
        std::array::from_fn(|k| {
            (0..32)
                .map(|i| {
                    let s = i16::from_le_bytes([scales[k][i / 2 * 2], scales[k][i / 2 * 2 + 1]]);
                    i32::from(s) * weight(signed, w[k][i]) * i32::from(*x.add(32 * k + i))
                })
                .sum()
        })
    }
    #[inline(always)]
    unsafe fn quad_dots_vnni(
        w: [Self::Prep; 4],
        factors: [[i16; 2]; 4],
        x: *const i8,
        signed: bool,
        scaled: bool,
    ) -> Self::Quad {
        std::array::from_fn(|k| {
            let half = |h: usize| -> i32 {
                let total: i32 = (16 * h..16 * h + 16)
                    .map(|i| weight(signed, w[k][i]) * i32::from(*x.add(32 * k + i)))
                    .sum();
                if scaled {
                    total * i32::from(factors[k][h])
                } else {
                    total
                }
            };
            half(0) + half(1)
        })
    }
    #[inline(always)]
    unsafe fn quad_unbias(q: Self::Quad, sums: *const f32) -> Self::Quad {
        std::array::from_fn(|k| q[k] - 128 * (*sums.add(k) as i32))
    }
    #[inline(always)]
    unsafe fn ints_from_quads(q: [Self::Quad; 4]) -> Self::Ints {
        std::array::from_fn(|l| q[l / 4][l % 4])
    }
    #[inline(always)]
    unsafe fn ints_zero() -> Self::Ints {
        [0; 16]
    }
    #[inline(always)]
    unsafe fn quad_zero() -> Self::Quad {
        [0; 4]
    }
    #[inline(always)]
    unsafe fn ints_f32(i: Self::Ints) -> Self {
        Scalar(i.map(|v| v as f32))
    }
    #[inline(always)]
    unsafe fn wide_load(p: *const u8) -> Self::Wide {
        std::ptr::read_unaligned(p as *const [u8; 64])
    }
    #[inline(always)]
    unsafe fn wide_zero() -> Self::Wide {
        [0; 64]
    }
    #[inline(always)]
    unsafe fn wide_products(
        _w_abs: Self::Wide,
        w: Self::Wide,
        x: *const i8,
        signed: bool,
    ) -> Self::Wide {
        let mut out = [0u8; 64];
        for p in 0..32 {
            let sum: i32 = (2 * p..2 * p + 2)
                .map(|b| weight(signed, w[b]) * i32::from(*x.add(b)))
                .sum();
            out[2 * p..2 * p + 2].copy_from_slice(&(sum as i16).to_le_bytes());
        }
        out
    }
    #[inline(always)]
    unsafe fn wide_add16(a: Self::Wide, b: Self::Wide) -> Self::Wide {
        let mut out = [0u8; 64];
        for p in 0..32 {
            let lane = |v: &[u8; 64]| i16::from_le_bytes([v[2 * p], v[2 * p + 1]]);
            out[2 * p..2 * p + 2].copy_from_slice(&lane(&a).wrapping_add(lane(&b)).to_le_bytes());
        }
        out
    }
    #[inline(always)]
    unsafe fn wide_widen(acc: Self::Ints, sums: Self::Wide, factors: Self::Wide) -> Self::Ints {
        let lane = |v: &[u8; 64], p: usize| i32::from(i16::from_le_bytes([v[2 * p], v[2 * p + 1]]));
        std::array::from_fn(|k| {
            acc[k]
                + lane(&sums, 2 * k) * lane(&factors, 2 * k)
                + lane(&sums, 2 * k + 1) * lane(&factors, 2 * k + 1)
        })
    }
    #[inline(always)]
    unsafe fn wide_dot(acc: Self::Ints, u: Self::Wide, s: Self::Wide) -> Self::Ints {
        std::array::from_fn(|k| {
            (4 * k..4 * k + 4).fold(acc[k], |sum, b| {
                sum.wrapping_add(i32::from(u[b]) * i32::from(s[b] as i8))
            })
        })
    }
    #[inline(always)]
    unsafe fn wide_bias(x: Self::Wide) -> Self::Wide {
        x.map(|b| b ^ 0x80)
    }
    #[inline(always)]
    unsafe fn ints_load(p: *const i32) -> Self::Ints {
        std::ptr::read_unaligned(p as *const [i32; 16])
    }
    #[inline(always)]
    unsafe fn ints_store(i: Self::Ints, p: *mut i32) {
        std::ptr::write_unaligned(p as *mut [i32; 16], i)
    }
    #[inline(always)]
    unsafe fn ints_add(a: Self::Ints, b: Self::Ints) -> Self::Ints {
        std::array::from_fn(|k| a[k].wrapping_add(b[k]))
    }
    #[inline(always)]
    unsafe fn ints_sub(a: Self::Ints, b: Self::Ints) -> Self::Ints {
        std::array::from_fn(|k| a[k].wrapping_sub(b[k]))
    }
    #[inline(always)]
    unsafe fn ints_mul(a: Self::Ints, b: Self::Ints) -> Self::Ints {
        std::array::from_fn(|k| a[k].wrapping_mul(b[k]))
    }
    #[inline(always)]
    unsafe fn f16_to_f32(bits: u16) -> f32 {
        f16::from_bits(bits).to_f32()
    }
    #[inline(always)]
    unsafe fn max(a: Self, b: Self) -> Self {
        Scalar(std::array::from_fn(|l| {
            if a.0[l] > b.0[l] {
                a.0[l]
            } else {
                b.0[l]
            }
        }))
    }
    #[inline(always)]
    unsafe fn round(self) -> Self {
        Scalar(self.0.map(f32::round_ties_even))
    }
    #[inline(always)]
    unsafe fn pow2i(self) -> Self {
        Scalar(
            self.0
                .map(|n| f32::from_bits(((n as i32 + 127) as u32) << 23)),
        )
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        std::ptr::write_unaligned(p as *mut [f32; LANES], self.0)
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{Avx2, Avx512};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Simd16;
    use half::{bf16, f16};
    use std::arch::x86_64::{
        __m128i, __m256, __m256i, __m512, _mm256_add_epi32, _mm256_add_ps, _mm256_castsi256_ps,
        _mm256_cvtepu16_epi32, _mm256_cvtph_ps, _mm256_cvtps_epi32, _mm256_fmadd_ps,
        _mm256_loadu_ps, _mm256_loadu_si256, _mm256_max_ps, _mm256_mul_ps, _mm256_round_ps,
        _mm256_set1_epi32, _mm256_set1_ps, _mm256_setzero_ps, _mm256_slli_epi32, _mm256_storeu_ps,
        _mm512_add_epi32, _mm512_add_ps, _mm512_castsi512_ps, _mm512_cvtepu16_epi32,
        _mm512_cvtph_ps, _mm512_cvtps_epi32, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_max_ps,
        _mm512_mul_ps, _mm512_roundscale_ps, _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_ps,
        _mm512_slli_epi32, _mm512_storeu_ps, _mm_loadu_si128, _MM_FROUND_NO_EXC,
        _MM_FROUND_TO_NEAREST_INT,
    };
    use std::arch::x86_64::{
        __m512i, _mm256_add_epi16, _mm256_castpd_ps, _mm256_madd_epi16, _mm256_maddubs_epi16,
        _mm256_maskz_set1_epi8, _mm256_set_m128i, _mm256_setzero_si256, _mm256_sign_epi8,
        _mm256_storeu_si256, _mm512_add_epi16, _mm512_castps512_ps256, _mm512_castps_pd,
        _mm512_castsi256_si512, _mm512_extractf64x4_pd, _mm512_inserti64x4, _mm512_loadu_si512,
        _mm512_madd_epi16, _mm512_maddubs_epi16, _mm512_mask_sub_epi8, _mm512_movepi8_mask,
        _mm512_setzero_si512, _mm_cvtph_ps, _mm_cvtss_f32, _mm_setzero_si128,
    };
    use std::arch::x86_64::{
        _mm256_and_si256, _mm256_blendv_ps, _mm256_cvtepi32_ps, _mm256_cvtepi8_epi32,
        _mm256_cvtepu8_epi32, _mm256_div_ps, _mm256_set1_epi16, _mm256_setr_epi32,
        _mm256_srl_epi32, _mm256_srli_epi32, _mm256_srlv_epi32, _mm256_sub_ps, _mm512_and_si512,
        _mm512_cvtepi32_ps, _mm512_cvtepi8_epi32, _mm512_cvtepu8_epi32, _mm512_div_ps,
        _mm512_mask_add_ps, _mm512_srl_epi32, _mm512_srli_epi32, _mm512_sub_ps, _mm_and_si128,
        _mm_cmpeq_epi8, _mm_cvtsi32_si128, _mm_loadl_epi64, _mm_or_si128, _mm_set1_epi16,
        _mm_set1_epi32, _mm_set1_epi64x, _mm_set1_epi8, _mm_setr_epi8, _mm_shuffle_epi8,
        _mm_srli_epi16, _mm_srli_si128,
    };
    use std::arch::x86_64::{
        _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_or_si256, _mm256_set1_epi8,
        _mm256_slli_epi16, _mm256_srl_epi16, _mm256_sub_epi8,
    };
    use std::arch::x86_64::{
        _mm256_mullo_epi32, _mm256_sub_epi32, _mm256_xor_si256, _mm512_mullo_epi32,
        _mm512_set1_epi8, _mm512_storeu_si512, _mm512_sub_epi32, _mm512_xor_si512,
    };

    /// The byte dot products, in functions of their own because they need the VNNI features
    /// that only the `-vnni` entry points enable (there they inline).
    mod vnni {
        use std::arch::x86_64::{
            __m256i, __m512i, _mm256_dpbusd_avx_epi32, _mm256_dpbusd_epi32, _mm512_dpbusd_epi32,
        };

        #[inline]
        #[target_feature(enable = "avx2,avxvnni")]
        pub(super) unsafe fn dot256(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
            _mm256_dpbusd_avx_epi32(acc, u, s)
        }

        #[inline]
        #[target_feature(enable = "avx512f,avx512vl,avx512vnni")]
        pub(super) unsafe fn dot256_evex(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
            _mm256_dpbusd_epi32(acc, u, s)
        }

        #[inline]
        #[target_feature(enable = "avx512f,avx512vnni")]
        pub(super) unsafe fn dot512(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
            _mm512_dpbusd_epi32(acc, u, s)
        }
    }

    /// Byte operations on 32 bytes shared by both x86 paths (AVX2 instructions).
    mod bytes {
        use super::super::RowIndex;
        use std::arch::x86_64::{
            __m128i, __m256i, _mm256_and_si256, _mm256_broadcastsi128_si256,
            _mm256_castsi128_si256, _mm256_cmpeq_epi8, _mm256_inserti128_si256, _mm256_loadu_si256,
            _mm256_set1_epi32, _mm256_set1_epi64x, _mm256_set1_epi8, _mm256_setr_epi8,
            _mm256_shuffle_epi8, _mm256_sll_epi16, _mm256_srl_epi16, _mm256_srlv_epi32,
            _mm_cvtsi32_si128, _mm_loadu_si128,
        };
        use std::arch::x86_64::{
            _mm256_abs_epi8, _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_hadd_epi32,
            _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_mullo_epi32, _mm256_setr_epi32,
            _mm256_setzero_si256, _mm256_sign_epi8, _mm_add_epi32, _mm_cvtps_epi32, _mm_loadu_ps,
            _mm_set1_epi16, _mm_slli_epi32, _mm_sub_epi32,
        };

        #[inline(always)]
        pub unsafe fn load(p: *const u8) -> __m256i {
            _mm256_loadu_si256(p as *const __m256i)
        }
        /// Word `v` of every input in output `v`: an 8 x 8 transpose of 32-bit words.
        #[inline(always)]
        pub unsafe fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
            use std::arch::x86_64::{
                _mm256_permute2x128_si256, _mm256_unpackhi_epi32, _mm256_unpackhi_epi64,
                _mm256_unpacklo_epi32, _mm256_unpacklo_epi64,
            };
            // Loops, not closures: a closure is compiled without the caller's features.
            // Words 0, 1 | 4, 5 and 2, 3 | 6, 7 of inputs 2 i and 2 i + 1, interleaved.
            let (mut lo, mut hi) = ([_mm256_setzero_si256(); 4], [_mm256_setzero_si256(); 4]);
            for i in 0..4 {
                lo[i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
                hi[i] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
            }
            // Word w | w + 4 of inputs 0-3 (4-7 in `q[4..]`).
            let q = [
                _mm256_unpacklo_epi64(lo[0], lo[1]),
                _mm256_unpackhi_epi64(lo[0], lo[1]),
                _mm256_unpacklo_epi64(hi[0], hi[1]),
                _mm256_unpackhi_epi64(hi[0], hi[1]),
                _mm256_unpacklo_epi64(lo[2], lo[3]),
                _mm256_unpackhi_epi64(lo[2], lo[3]),
                _mm256_unpacklo_epi64(hi[2], hi[3]),
                _mm256_unpackhi_epi64(hi[2], hi[3]),
            ];
            let mut words = [_mm256_setzero_si256(); 8];
            for v in 0..4 {
                words[v] = _mm256_permute2x128_si256::<0x20>(q[v], q[v + 4]);
                words[v + 4] = _mm256_permute2x128_si256::<0x31>(q[v], q[v + 4]);
            }
            words
        }
        #[inline(always)]
        pub unsafe fn nibbles16(p: *const u8) -> __m256i {
            // A broadcast load (no shuffle uop) and one shift by lane, the high 128 bits by 4:
            // one operation fewer than shifting 16 bytes and inserting them.
            let both = _mm256_broadcastsi128_si256(_mm_loadu_si128(p as *const __m128i));
            let high_by_four = _mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
            _mm256_and_si256(high_by_four, _mm256_set1_epi8(15))
        }
        #[inline(always)]
        pub unsafe fn lookup16(b: __m256i, table: &[u8; 16]) -> __m256i {
            let table = _mm_loadu_si128(table.as_ptr() as *const __m128i);
            _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), b)
        }

        #[inline(always)]
        pub unsafe fn bits(b: __m256i, shift: u32, mask: u8) -> __m256i {
            _mm256_and_si256(
                _mm256_srl_epi16(b, _mm_cvtsi32_si128(shift as i32)),
                _mm256_set1_epi8(mask as i8),
            )
        }
        #[inline(always)]
        pub unsafe fn high(b: __m256i, bit: u32, count: u32) -> __m256i {
            moved(b, bit, count, 4)
        }
        #[inline(always)]
        pub unsafe fn moved(b: __m256i, bit: u32, count: u32, to: u32) -> __m256i {
            // Shifting 16-bit lanes toward bit `to` and masking bits `to..to + count` keeps
            // only bits that started in the same byte (`bit + count <= 8`, `to + count <= 8`):
            // a left shift brings the low byte's bits in below `to - bit <= to`, a right one
            // the high byte's above `8 - (bit - to) >= to + count`.
            let moved = if bit >= to {
                _mm256_srl_epi16(b, _mm_cvtsi32_si128((bit - to) as i32))
            } else {
                _mm256_sll_epi16(b, _mm_cvtsi32_si128((to - bit) as i32))
            };
            _mm256_and_si256(moved, _mm256_set1_epi8((((1u32 << count) - 1) << to) as i8))
        }
        /// Byte `i` repeats byte `i / 8` of the word; `bit` picks bit `i % 8`.
        #[inline(always)]
        pub unsafe fn where_bits(word: u32, v: u8) -> __m256i {
            let spread = _mm256_shuffle_epi8(
                _mm256_set1_epi32(word as i32),
                _mm256_setr_epi8(
                    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                    3, 3, 3, 3, 3, 3,
                ),
            );
            let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            _mm256_and_si256(
                _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                _mm256_set1_epi8(v as i8),
            )
        }
        #[inline(always)]
        pub unsafe fn int_halves(lo: i16, hi: i16) -> __m256i {
            _mm256_inserti128_si256::<1>(
                _mm256_castsi128_si256(_mm_set1_epi16(lo)),
                _mm_set1_epi16(hi),
            )
        }
        /// A layout's eight indices (the rows of four bytes) in 32-bit lanes.
        #[inline(always)]
        unsafe fn eight_indices(index: RowIndex) -> __m256i {
            use std::arch::x86_64::{
                _mm256_cvtepu16_epi32, _mm256_cvtepu8_epi32, _mm256_or_si256, _mm256_sll_epi32,
                _mm256_srl_epi32, _mm_loadl_epi64,
            };
            let s = index.high_stride as i32;
            let high = _mm256_srlv_epi32(
                _mm256_set1_epi32(index.high as i32),
                _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s),
            );
            let high = _mm256_sll_epi32(
                _mm256_and_si256(high, _mm256_set1_epi32((1 << index.high_bits) - 1)),
                _mm_cvtsi32_si128(index.high_at as i32),
            );
            let low = match index.low_bits {
                0 => return high,
                8 => _mm256_cvtepu8_epi32(_mm_loadl_epi64(index.low as *const __m128i)),
                _ => _mm256_cvtepu16_epi32(_mm_loadu_si128(index.low as *const __m128i)),
            };
            let low = _mm256_srl_epi32(low, _mm_cvtsi32_si128(index.low_shift as i32));
            _mm256_or_si256(
                _mm256_and_si256(low, _mm256_set1_epi32(index.low_mask as i32)),
                high,
            )
        }
        /// The eight rows in one gather.
        #[inline(always)]
        pub unsafe fn rows4(table: &[u32], index: RowIndex) -> __m256i {
            debug_assert!(index.max() < table.len());
            std::arch::x86_64::_mm256_i32gather_epi32::<4>(
                table.as_ptr() as *const i32,
                eight_indices(index),
            )
        }
        #[inline(always)]
        pub unsafe fn abs(b: __m256i) -> __m256i {
            _mm256_abs_epi8(b)
        }
        #[inline(always)]
        pub unsafe fn prep(w: __m256i, signed: bool) -> (__m256i, __m256i) {
            if signed {
                (_mm256_abs_epi8(w), w)
            } else {
                (w, w)
            }
        }
        /// Magnitudes of the weights times the activations carrying the weights' signs
        /// (`vpmaddubsw` multiplies unsigned by signed bytes), pairs summed to 16 bits, then
        /// times the factors to 32; two rounds of horizontal adds and one of halves leave each
        /// chunk's total.
        #[inline(always)]
        pub unsafe fn quad_dots(
            w: [(__m256i, __m256i); 4],
            scales: [__m256i; 4],
            x: *const i8,
            signed: bool,
        ) -> __m128i {
            // A macro, not a closure: a closure is compiled without the caller's features.
            macro_rules! dot {
                ($k:literal) => {{
                    let x = _mm256_loadu_si256(x.add(32 * $k) as *const __m256i);
                    let x = if signed {
                        _mm256_sign_epi8(x, w[$k].1)
                    } else {
                        x
                    };
                    _mm256_madd_epi16(_mm256_maddubs_epi16(w[$k].0, x), scales[$k])
                }};
            }
            let h = _mm256_hadd_epi32(
                _mm256_hadd_epi32(dot!(0), dot!(1)),
                _mm256_hadd_epi32(dot!(2), dot!(3)),
            );
            _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
        }
        /// As `quad_dots`, each chunk's products summed by one `vpdpbusd` (the EVEX one with
        /// `EVEX`, else AVX-VNNI's); the tree leaves the chunks' first-half totals in the low
        /// 128 bits and second-half ones in the high, where the factors multiply them.
        #[inline(always)]
        pub unsafe fn quad_dots_vnni<const EVEX: bool>(
            w: [(__m256i, __m256i); 4],
            factors: [[i16; 2]; 4],
            x: *const i8,
            signed: bool,
            scaled: bool,
        ) -> __m128i {
            macro_rules! dot {
                ($k:literal) => {{
                    let x = _mm256_loadu_si256(x.add(32 * $k) as *const __m256i);
                    let x = if signed {
                        _mm256_sign_epi8(x, w[$k].1)
                    } else {
                        x
                    };
                    if EVEX {
                        super::vnni::dot256_evex(_mm256_setzero_si256(), w[$k].0, x)
                    } else {
                        super::vnni::dot256(_mm256_setzero_si256(), w[$k].0, x)
                    }
                }};
            }
            let mut h = _mm256_hadd_epi32(
                _mm256_hadd_epi32(dot!(0), dot!(1)),
                _mm256_hadd_epi32(dot!(2), dot!(3)),
            );
            if scaled {
                let f = factors;
                let f = _mm256_setr_epi32(
                    f[0][0].into(),
                    f[1][0].into(),
                    f[2][0].into(),
                    f[3][0].into(),
                    f[0][1].into(),
                    f[1][1].into(),
                    f[2][1].into(),
                    f[3][1].into(),
                );
                h = _mm256_mullo_epi32(h, f);
            }
            _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h))
        }
        #[inline(always)]
        pub unsafe fn quad_unbias(q: __m128i, sums: *const f32) -> __m128i {
            let sums = _mm_cvtps_epi32(_mm_loadu_ps(sums));
            _mm_sub_epi32(q, _mm_slli_epi32::<7>(sums))
        }
    }

    /// The byte operations both x86 paths share (AVX2 instructions on 32 bytes), and the
    /// scalar f16 widening.
    macro_rules! bytes_ops {
        () => {
            #[inline(always)]
            unsafe fn bytes_load(p: *const u8) -> __m256i {
                bytes::load(p)
            }
            #[inline(always)]
            unsafe fn bytes_nibbles16(p: *const u8) -> __m256i {
                bytes::nibbles16(p)
            }
            #[inline(always)]
            unsafe fn bytes_bits(b: __m256i, shift: u32, mask: u8) -> __m256i {
                bytes::bits(b, shift, mask)
            }
            #[inline(always)]
            unsafe fn bytes_high(b: __m256i, bit: u32, count: u32) -> __m256i {
                bytes::high(b, bit, count)
            }
            #[inline(always)]
            unsafe fn bytes_moved(b: __m256i, bit: u32, count: u32, to: u32) -> __m256i {
                bytes::moved(b, bit, count, to)
            }
            #[inline(always)]
            unsafe fn bytes_or(a: __m256i, b: __m256i) -> __m256i {
                _mm256_or_si256(a, b)
            }
            #[inline(always)]
            unsafe fn bytes_lookup16(b: __m256i, table: &[u8; 16]) -> __m256i {
                bytes::lookup16(b, table)
            }
            #[inline(always)]
            unsafe fn bytes_sub(b: __m256i, v: u8) -> __m256i {
                _mm256_sub_epi8(b, _mm256_set1_epi8(v as i8))
            }
            #[inline(always)]
            unsafe fn bytes_abs(b: __m256i) -> __m256i {
                bytes::abs(b)
            }
            #[inline(always)]
            unsafe fn bytes_sign(b: __m256i, signs: __m256i) -> __m256i {
                _mm256_sign_epi8(b, signs)
            }
            #[inline(always)]
            unsafe fn bytes_zero() -> __m256i {
                _mm256_setzero_si256()
            }
            #[inline(always)]
            unsafe fn bytes_rows4(table: &[u32], index: super::RowIndex) -> __m256i {
                bytes::rows4(table, index)
            }
            #[inline(always)]
            unsafe fn int_halves(lo: i16, hi: i16) -> __m256i {
                bytes::int_halves(lo, hi)
            }
            #[inline(always)]
            unsafe fn prep(w: __m256i, signed: bool) -> (__m256i, __m256i) {
                bytes::prep(w, signed)
            }
            #[inline(always)]
            unsafe fn prep_store(w: (__m256i, __m256i), abs: *mut u8, values: *mut u8) {
                _mm256_storeu_si256(abs as *mut __m256i, w.0);
                _mm256_storeu_si256(values as *mut __m256i, w.1);
            }
            #[inline(always)]
            unsafe fn quad_dots(
                w: [(__m256i, __m256i); 4],
                scales: [__m256i; 4],
                x: *const i8,
                signed: bool,
            ) -> __m128i {
                bytes::quad_dots(w, scales, x, signed)
            }
            #[inline(always)]
            unsafe fn f16_to_f32(bits: u16) -> f32 {
                _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
            }
            #[inline(always)]
            unsafe fn chunks_to_lines(chunks: &[[u8; 32]; 16], lines: *mut u8) {
                for half in 0..2 {
                    let mut rows = [_mm256_setzero_si256(); 8];
                    for (k, row) in rows.iter_mut().enumerate() {
                        *row = bytes::load(chunks[8 * half + k].as_ptr());
                    }
                    for (v, &w) in bytes::transpose8(rows).iter().enumerate() {
                        _mm256_storeu_si256(lines.add(64 * v + 32 * half) as *mut __m256i, w);
                    }
                }
            }
        };
    }

    /// The last three levels of `reduce_lanes`' tree on lanes `l + (l + 8)`: halves added
    /// pairwise, as there.
    #[inline(always)]
    unsafe fn tree8(v: __m256) -> f32 {
        use std::arch::x86_64::{
            _mm256_castps256_ps128, _mm256_extractf128_ps, _mm_add_ps, _mm_add_ss, _mm_movehdup_ps,
            _mm_movehl_ps,
        };
        let four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let two = _mm_add_ps(four, _mm_movehl_ps(four, four));
        _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)))
    }

    /// Lanes 0-7 and 8-15 in two AVX2 registers.
    #[derive(Clone, Copy)]
    pub struct Avx2(pub(crate) __m256, pub(crate) __m256);

    impl Simd16 for Avx2 {
        const REGISTERS: usize = 8;
        #[inline(always)]
        unsafe fn zero() -> Self {
            Avx2(_mm256_setzero_ps(), _mm256_setzero_ps())
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            let s = _mm256_set1_ps(v);
            Avx2(s, s)
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Avx2(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
        }
        #[inline(always)]
        unsafe fn load_f16(p: *const f16) -> Self {
            let p = p as *const __m128i;
            Avx2(
                _mm256_cvtph_ps(_mm_loadu_si128(p)),
                _mm256_cvtph_ps(_mm_loadu_si128(p.add(1))),
            )
        }
        #[inline(always)]
        unsafe fn load_bf16(p: *const bf16) -> Self {
            // A bf16 is the top half of an f32: widen and shift.
            let p = p as *const __m128i;
            let widen =
                |v: __m128i| _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
            Avx2(widen(_mm_loadu_si128(p)), widen(_mm_loadu_si128(p.add(1))))
        }
        #[inline(always)]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            Avx2(
                _mm256_fmadd_ps(a.0, b.0, c.0),
                _mm256_fmadd_ps(a.1, b.1, c.1),
            )
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            Avx2(_mm256_mul_ps(a.0, b.0), _mm256_mul_ps(a.1, b.1))
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            Avx2(_mm256_add_ps(a.0, b.0), _mm256_add_ps(a.1, b.1))
        }
        #[inline(always)]
        unsafe fn sub(a: Self, b: Self) -> Self {
            Avx2(_mm256_sub_ps(a.0, b.0), _mm256_sub_ps(a.1, b.1))
        }
        #[inline(always)]
        unsafe fn div(a: Self, b: Self) -> Self {
            Avx2(_mm256_div_ps(a.0, b.0), _mm256_div_ps(a.1, b.1))
        }
        #[inline(always)]
        unsafe fn load_i8(p: *const i8) -> Self {
            // No closures here: they would be compiled without the path's features.
            let lo = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p as *const __m128i));
            let hi = _mm256_cvtepi8_epi32(_mm_loadl_epi64(p.add(8) as *const __m128i));
            Avx2(_mm256_cvtepi32_ps(lo), _mm256_cvtepi32_ps(hi))
        }
        #[inline(always)]
        unsafe fn splat_f16(bits: u16) -> Self {
            let v = _mm256_cvtph_ps(_mm_set1_epi16(bits as i16));
            Avx2(v, v)
        }
        #[inline(always)]
        unsafe fn add_where_bits(self, word: u32, v: f32) -> Self {
            let w = _mm256_set1_epi32(word as i32);
            let lo = _mm256_slli_epi32(
                _mm256_srlv_epi32(w, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)),
                31,
            );
            let hi = _mm256_slli_epi32(
                _mm256_srlv_epi32(w, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)),
                31,
            );
            let v = _mm256_set1_ps(v);
            Avx2(
                _mm256_blendv_ps(self.0, _mm256_add_ps(self.0, v), _mm256_castsi256_ps(lo)),
                _mm256_blendv_ps(self.1, _mm256_add_ps(self.1, v), _mm256_castsi256_ps(hi)),
            )
        }
        #[inline(always)]
        unsafe fn load_u8_nibbles(p: *const u8) -> (Self, Self) {
            let a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i));
            let b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.add(8) as *const __m128i));
            let m = _mm256_set1_epi32(15);
            (
                Avx2(
                    _mm256_cvtepi32_ps(_mm256_and_si256(a, m)),
                    _mm256_cvtepi32_ps(_mm256_and_si256(b, m)),
                ),
                Avx2(
                    _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4)),
                    _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4)),
                ),
            )
        }
        /// The fifth bits as bytes (each of the word's 32 bits tested in its own byte) joined
        /// to the nibbles before widening: a third fewer instructions than adding 16 per lane
        /// with shifts and blends, which was half of Q5_0 decoding on this path.
        #[inline(always)]
        unsafe fn five_bit_values(qs: *const u8, word: u32) -> (Self, Self) {
            let bytes = _mm_loadu_si128(qs as *const __m128i);
            let fifteen = _mm_set1_epi8(15);
            let sixteen = _mm_set1_epi8(16);
            let low = _mm_and_si128(bytes, fifteen);
            let high = _mm_and_si128(_mm_srli_epi16::<4>(bytes), fifteen);
            // Byte `i` of `spread` repeats byte `i / 8` of the word; `bit` picks bit `i % 8`.
            let w = _mm_set1_epi32(word as i32);
            let bit = _mm_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
            // Macros, not closures: a closure is compiled without the path's features.
            macro_rules! fifth {
                ($spread:expr) => {
                    _mm_and_si128(_mm_cmpeq_epi8(_mm_and_si128($spread, bit), bit), sixteen)
                };
            }
            macro_rules! widen {
                ($v:expr) => {
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32($v))
                };
            }
            let low_spread = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
            let high_spread = _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
            let low = _mm_or_si128(low, fifth!(_mm_shuffle_epi8(w, low_spread)));
            let high = _mm_or_si128(high, fifth!(_mm_shuffle_epi8(w, high_spread)));
            (
                Avx2(widen!(low), widen!(_mm_srli_si128::<8>(low))),
                Avx2(widen!(high), widen!(_mm_srli_si128::<8>(high))),
            )
        }
        /// Masked as bytes, then widened: one shift and one mask for 32 values.
        #[inline(always)]
        unsafe fn nibbles32(p: *const u8, shift: u32) -> (Self, Self) {
            let q = _mm256_and_si256(
                _mm256_srl_epi16(
                    _mm256_loadu_si256(p as *const __m256i),
                    _mm_cvtsi32_si128(shift as i32),
                ),
                _mm256_set1_epi8(15),
            );
            let (first, second) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
            macro_rules! widen {
                ($v:expr) => {
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32($v))
                };
            }
            (
                Avx2(widen!(first), widen!(_mm_srli_si128::<8>(first))),
                Avx2(widen!(second), widen!(_mm_srli_si128::<8>(second))),
            )
        }
        /// Joined as bytes, then widened once: half the instructions of widening the two
        /// bit fields apart (Q6_K was a third of AVX2 decode time for a sixth of the bytes).
        #[inline(always)]
        unsafe fn six_bit_values(
            ql: *const u8,
            qh: *const u8,
            lo_shift: u32,
            hi_shift: u32,
        ) -> (Self, Self) {
            let low = _mm256_and_si256(
                _mm256_srl_epi16(
                    _mm256_loadu_si256(ql as *const __m256i),
                    _mm_cvtsi32_si128(lo_shift as i32),
                ),
                _mm256_set1_epi8(15),
            );
            let high = _mm256_and_si256(
                _mm256_srl_epi16(
                    _mm256_loadu_si256(qh as *const __m256i),
                    _mm_cvtsi32_si128(hi_shift as i32),
                ),
                _mm256_set1_epi8(3),
            );
            // Each byte below 64, so the 16-bit shift moves no bit across bytes.
            let q = _mm256_sub_epi8(
                _mm256_or_si256(low, _mm256_slli_epi16::<4>(high)),
                _mm256_set1_epi8(32),
            );
            let (first, second) = (_mm256_castsi256_si128(q), _mm256_extracti128_si256::<1>(q));
            macro_rules! widen {
                ($v:expr) => {
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32($v))
                };
            }
            (
                Avx2(widen!(first), widen!(_mm_srli_si128::<8>(first))),
                Avx2(widen!(second), widen!(_mm_srli_si128::<8>(second))),
            )
        }
        #[inline(always)]
        unsafe fn load_u8_bits(p: *const u8, shift: u32, mask: i32) -> Self {
            let count = _mm_cvtsi32_si128(shift as i32);
            let mask = _mm256_set1_epi32(mask);
            let lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p as *const __m128i));
            let hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(p.add(8) as *const __m128i));
            Avx2(
                _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(lo, count), mask)),
                _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(hi, count), mask)),
            )
        }
        type Bytes = __m256i;
        type Prep = (__m256i, __m256i);
        type Quad = __m128i;
        /// Chunks 0-7 and 8-15.
        type Ints = [__m256i; 2];
        /// Chunks 0-7 and 8-15.
        type Wide = [__m256i; 2];
        bytes_ops!();
        #[inline(always)]
        unsafe fn bytes_where_bits(word: u32, v: u8) -> __m256i {
            bytes::where_bits(word, v)
        }
        #[inline(always)]
        unsafe fn quad_dots_vnni(
            w: [(__m256i, __m256i); 4],
            factors: [[i16; 2]; 4],
            x: *const i8,
            signed: bool,
            scaled: bool,
        ) -> __m128i {
            bytes::quad_dots_vnni::<false>(w, factors, x, signed, scaled)
        }
        #[inline(always)]
        unsafe fn quad_unbias(q: __m128i, sums: *const f32) -> __m128i {
            bytes::quad_unbias(q, sums)
        }
        #[inline(always)]
        unsafe fn ints_from_quads(q: [__m128i; 4]) -> [__m256i; 2] {
            [_mm256_set_m128i(q[1], q[0]), _mm256_set_m128i(q[3], q[2])]
        }
        #[inline(always)]
        unsafe fn quad_zero() -> __m128i {
            _mm_setzero_si128()
        }
        #[inline(always)]
        unsafe fn ints_zero() -> [__m256i; 2] {
            [_mm256_setzero_si256(); 2]
        }
        #[inline(always)]
        unsafe fn ints_f32(i: [__m256i; 2]) -> Self {
            Avx2(_mm256_cvtepi32_ps(i[0]), _mm256_cvtepi32_ps(i[1]))
        }
        #[inline(always)]
        unsafe fn wide_load(p: *const u8) -> [__m256i; 2] {
            [bytes::load(p), bytes::load(p.add(32))]
        }
        #[inline(always)]
        unsafe fn wide_zero() -> [__m256i; 2] {
            [_mm256_setzero_si256(); 2]
        }
        #[inline(always)]
        unsafe fn wide_products(
            w_abs: [__m256i; 2],
            w: [__m256i; 2],
            x: *const i8,
            signed: bool,
        ) -> [__m256i; 2] {
            // A macro, not a closure: a closure is compiled without the caller's features.
            macro_rules! half {
                ($h:literal) => {{
                    let x = _mm256_loadu_si256(x.add(32 * $h) as *const __m256i);
                    let x = if signed {
                        _mm256_sign_epi8(x, w[$h])
                    } else {
                        x
                    };
                    _mm256_maddubs_epi16(w_abs[$h], x)
                }};
            }
            [half!(0), half!(1)]
        }
        #[inline(always)]
        unsafe fn wide_add16(a: [__m256i; 2], b: [__m256i; 2]) -> [__m256i; 2] {
            [_mm256_add_epi16(a[0], b[0]), _mm256_add_epi16(a[1], b[1])]
        }
        #[inline(always)]
        unsafe fn wide_widen(
            acc: [__m256i; 2],
            sums: [__m256i; 2],
            factors: [__m256i; 2],
        ) -> [__m256i; 2] {
            [
                _mm256_add_epi32(acc[0], _mm256_madd_epi16(sums[0], factors[0])),
                _mm256_add_epi32(acc[1], _mm256_madd_epi16(sums[1], factors[1])),
            ]
        }
        #[inline(always)]
        unsafe fn wide_dot(acc: [__m256i; 2], u: [__m256i; 2], s: [__m256i; 2]) -> [__m256i; 2] {
            [
                vnni::dot256(acc[0], u[0], s[0]),
                vnni::dot256(acc[1], u[1], s[1]),
            ]
        }
        #[inline(always)]
        unsafe fn wide_bias(x: [__m256i; 2]) -> [__m256i; 2] {
            let bias = _mm256_set1_epi8(-128);
            [_mm256_xor_si256(x[0], bias), _mm256_xor_si256(x[1], bias)]
        }
        #[inline(always)]
        unsafe fn ints_load(p: *const i32) -> [__m256i; 2] {
            [
                bytes::load(p as *const u8),
                bytes::load(p.add(8) as *const u8),
            ]
        }
        #[inline(always)]
        unsafe fn ints_store(i: [__m256i; 2], p: *mut i32) {
            _mm256_storeu_si256(p as *mut __m256i, i[0]);
            _mm256_storeu_si256(p.add(8) as *mut __m256i, i[1]);
        }
        #[inline(always)]
        unsafe fn ints_add(a: [__m256i; 2], b: [__m256i; 2]) -> [__m256i; 2] {
            [_mm256_add_epi32(a[0], b[0]), _mm256_add_epi32(a[1], b[1])]
        }
        #[inline(always)]
        unsafe fn ints_sub(a: [__m256i; 2], b: [__m256i; 2]) -> [__m256i; 2] {
            [_mm256_sub_epi32(a[0], b[0]), _mm256_sub_epi32(a[1], b[1])]
        }
        #[inline(always)]
        unsafe fn ints_mul(a: [__m256i; 2], b: [__m256i; 2]) -> [__m256i; 2] {
            [
                _mm256_mullo_epi32(a[0], b[0]),
                _mm256_mullo_epi32(a[1], b[1]),
            ]
        }
        #[inline(always)]
        unsafe fn max(a: Self, b: Self) -> Self {
            Avx2(_mm256_max_ps(a.0, b.0), _mm256_max_ps(a.1, b.1))
        }
        #[inline(always)]
        unsafe fn round(self) -> Self {
            const NEAREST: i32 = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
            Avx2(
                _mm256_round_ps::<NEAREST>(self.0),
                _mm256_round_ps::<NEAREST>(self.1),
            )
        }
        #[inline(always)]
        unsafe fn pow2i(self) -> Self {
            let bits = |n: __m256| {
                let biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
                _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23))
            };
            Avx2(bits(self.0), bits(self.1))
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            _mm256_storeu_ps(p, self.0);
            _mm256_storeu_ps(p.add(8), self.1);
        }
        #[inline(always)]
        unsafe fn reduce(self) -> f32 {
            tree8(_mm256_add_ps(self.0, self.1))
        }
    }

    #[derive(Clone, Copy)]
    pub struct Avx512(pub(crate) __m512);

    impl Simd16 for Avx512 {
        const REGISTERS: usize = 32;
        #[inline(always)]
        unsafe fn zero() -> Self {
            Avx512(_mm512_setzero_ps())
        }
        #[inline(always)]
        unsafe fn splat(v: f32) -> Self {
            Avx512(_mm512_set1_ps(v))
        }
        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            Avx512(_mm512_loadu_ps(p))
        }
        #[inline(always)]
        unsafe fn load_f16(p: *const f16) -> Self {
            Avx512(_mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i)))
        }
        #[inline(always)]
        unsafe fn load_bf16(p: *const bf16) -> Self {
            let wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p as *const __m256i));
            Avx512(_mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)))
        }
        #[inline(always)]
        unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
            Avx512(_mm512_fmadd_ps(a.0, b.0, c.0))
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            Avx512(_mm512_mul_ps(a.0, b.0))
        }
        #[inline(always)]
        unsafe fn add(a: Self, b: Self) -> Self {
            Avx512(_mm512_add_ps(a.0, b.0))
        }
        #[inline(always)]
        unsafe fn sub(a: Self, b: Self) -> Self {
            Avx512(_mm512_sub_ps(a.0, b.0))
        }
        #[inline(always)]
        unsafe fn div(a: Self, b: Self) -> Self {
            Avx512(_mm512_div_ps(a.0, b.0))
        }
        #[inline(always)]
        unsafe fn load_i8(p: *const i8) -> Self {
            Avx512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
                p as *const __m128i,
            ))))
        }
        #[inline(always)]
        unsafe fn splat_f16(bits: u16) -> Self {
            Avx512(_mm512_cvtph_ps(_mm256_set1_epi16(bits as i16)))
        }
        #[inline(always)]
        unsafe fn add_where_bits(self, word: u32, v: f32) -> Self {
            Avx512(_mm512_mask_add_ps(
                self.0,
                word as u16,
                self.0,
                _mm512_set1_ps(v),
            ))
        }
        #[inline(always)]
        unsafe fn load_u8_nibbles(p: *const u8) -> (Self, Self) {
            let wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i));
            (
                Avx512(_mm512_cvtepi32_ps(_mm512_and_si512(
                    wide,
                    _mm512_set1_epi32(15),
                ))),
                Avx512(_mm512_cvtepi32_ps(_mm512_srli_epi32(wide, 4))),
            )
        }
        #[inline(always)]
        unsafe fn load_u8_bits(p: *const u8, shift: u32, mask: i32) -> Self {
            let wide = _mm512_cvtepu8_epi32(_mm_loadu_si128(p as *const __m128i));
            let bits = _mm512_srl_epi32(wide, _mm_cvtsi32_si128(shift as i32));
            Avx512(_mm512_cvtepi32_ps(_mm512_and_si512(
                bits,
                _mm512_set1_epi32(mask),
            )))
        }
        type Bytes = __m256i;
        type Prep = (__m256i, __m256i);
        type Quad = __m128i;
        type Ints = __m512i;
        type Wide = __m512i;
        bytes_ops!();
        #[inline(always)]
        unsafe fn bytes_where_bits(word: u32, v: u8) -> __m256i {
            _mm256_maskz_set1_epi8(word, v as i8)
        }
        #[inline(always)]
        unsafe fn quad_dots_vnni(
            w: [(__m256i, __m256i); 4],
            factors: [[i16; 2]; 4],
            x: *const i8,
            signed: bool,
            scaled: bool,
        ) -> __m128i {
            bytes::quad_dots_vnni::<true>(w, factors, x, signed, scaled)
        }
        #[inline(always)]
        unsafe fn quad_unbias(q: __m128i, sums: *const f32) -> __m128i {
            bytes::quad_unbias(q, sums)
        }
        #[inline(always)]
        unsafe fn ints_from_quads(q: [__m128i; 4]) -> __m512i {
            let low = _mm256_set_m128i(q[1], q[0]);
            let high = _mm256_set_m128i(q[3], q[2]);
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high)
        }
        #[inline(always)]
        unsafe fn quad_zero() -> __m128i {
            _mm_setzero_si128()
        }
        #[inline(always)]
        unsafe fn ints_zero() -> __m512i {
            _mm512_setzero_si512()
        }
        #[inline(always)]
        unsafe fn ints_f32(i: __m512i) -> Self {
            Avx512(_mm512_cvtepi32_ps(i))
        }
        #[inline(always)]
        unsafe fn wide_load(p: *const u8) -> __m512i {
            _mm512_loadu_si512(p as *const _)
        }
        #[inline(always)]
        unsafe fn wide_zero() -> __m512i {
            _mm512_setzero_si512()
        }
        /// The weights' signs as a mask of the negative bytes, moved onto the activations.
        #[inline(always)]
        unsafe fn wide_products(w_abs: __m512i, w: __m512i, x: *const i8, signed: bool) -> __m512i {
            let x = _mm512_loadu_si512(x as *const _);
            let x = if signed {
                _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x)
            } else {
                x
            };
            _mm512_maddubs_epi16(w_abs, x)
        }
        #[inline(always)]
        unsafe fn wide_add16(a: __m512i, b: __m512i) -> __m512i {
            _mm512_add_epi16(a, b)
        }
        #[inline(always)]
        unsafe fn wide_widen(acc: __m512i, sums: __m512i, factors: __m512i) -> __m512i {
            _mm512_add_epi32(acc, _mm512_madd_epi16(sums, factors))
        }
        #[inline(always)]
        unsafe fn wide_dot(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
            vnni::dot512(acc, u, s)
        }
        #[inline(always)]
        unsafe fn wide_bias(x: __m512i) -> __m512i {
            _mm512_xor_si512(x, _mm512_set1_epi8(-128))
        }
        #[inline(always)]
        unsafe fn ints_load(p: *const i32) -> __m512i {
            _mm512_loadu_si512(p as *const _)
        }
        #[inline(always)]
        unsafe fn ints_store(i: __m512i, p: *mut i32) {
            _mm512_storeu_si512(p as *mut _, i)
        }
        #[inline(always)]
        unsafe fn ints_add(a: __m512i, b: __m512i) -> __m512i {
            _mm512_add_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn ints_sub(a: __m512i, b: __m512i) -> __m512i {
            _mm512_sub_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn ints_mul(a: __m512i, b: __m512i) -> __m512i {
            _mm512_mullo_epi32(a, b)
        }
        #[inline(always)]
        unsafe fn max(a: Self, b: Self) -> Self {
            Avx512(_mm512_max_ps(a.0, b.0))
        }
        #[inline(always)]
        unsafe fn round(self) -> Self {
            Avx512(_mm512_roundscale_ps::<
                { _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC },
            >(self.0))
        }
        #[inline(always)]
        unsafe fn pow2i(self) -> Self {
            let biased = _mm512_add_epi32(_mm512_cvtps_epi32(self.0), _mm512_set1_epi32(127));
            Avx512(_mm512_castsi512_ps(_mm512_slli_epi32(biased, 23)))
        }
        #[inline(always)]
        unsafe fn store(self, p: *mut f32) {
            _mm512_storeu_ps(p, self.0)
        }
        #[inline(always)]
        unsafe fn reduce(self) -> f32 {
            let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(self.0)));
            tree8(_mm256_add_ps(_mm512_castps512_ps256(self.0), high))
        }
    }
}

/// Defines `$name(isa, args..)`, which runs the `#[inline(always)]` generic kernel
/// `$kernel::<S, G..>(args..)` compiled for the chosen path: one `#[target_feature]` function per
/// path, so the kernel is inlined and compiled with that path's instructions. Call it inside
/// each parallel task (closures do not inherit target features).
macro_rules! multiversion {
    ($vis:vis fn $name:ident<$($g:ident: $bound:path),*>($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $kernel:ident) => {
        #[allow(clippy::too_many_arguments)]
        $vis fn $name<$($g: $bound),*>(isa: $crate::kernels::Isa, $($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx512<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? {
                $kernel::<$crate::kernels::simd::Avx512, $($g),*>($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma,f16c")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2<$($g: $bound),*>($($arg: $ty),*) $(-> $ret)? {
                $kernel::<$crate::kernels::simd::Avx2, $($g),*>($($arg),*)
            }
            // SAFETY: a path is only ever chosen after checking the CPU has it (`Isa`); the
            // kernels' own pointer contracts are upheld by their safe callers.
            unsafe {
                match isa.vector() {
                    #[cfg(target_arch = "x86_64")]
                    $crate::kernels::Isa::Avx512 => avx512::<$($g),*>($($arg),*),
                    #[cfg(target_arch = "x86_64")]
                    $crate::kernels::Isa::Avx2 => avx2::<$($g),*>($($arg),*),
                    _ => $kernel::<$crate::kernels::simd::Scalar, $($g),*>($($arg),*),
                }
            }
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Isa;

    #[inline(always)]
    unsafe fn exp_all<S: Simd16>(xs: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; xs.len()];
        for (x, o) in xs.chunks_exact(LANES).zip(out.chunks_exact_mut(LANES)) {
            exp(S::load(x.as_ptr())).store(o.as_mut_ptr());
        }
        out
    }
    multiversion!(fn exps<>(xs: &[f32]) -> Vec<f32> = exp_all);

    #[inline(always)]
    unsafe fn lines_of<S: Simd16>(chunks: &[[u8; 32]; 16]) -> Vec<u8> {
        let mut lines = vec![0u8; 512];
        S::chunks_to_lines(chunks, lines.as_mut_ptr());
        lines
    }
    multiversion!(fn lines_on<>(chunks: &[[u8; 32]; 16]) -> Vec<u8> = lines_of);

    #[test]
    fn chunks_go_to_lines_four_bytes_at_a_time_on_every_path() {
        let mut seed = 12345u32;
        let chunks: [[u8; 32]; 16] = std::array::from_fn(|_| {
            std::array::from_fn(|_| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (seed >> 24) as u8
            })
        });
        for isa in Isa::supported() {
            let lines = lines_on(isa, &chunks);
            for (k, chunk) in chunks.iter().enumerate() {
                for v in 0..8 {
                    let got = &lines[64 * v + 4 * k..64 * v + 4 * k + 4];
                    assert_eq!(got, &chunk[4 * v..4 * v + 4], "{isa}: chunk {k}, word {v}");
                }
            }
        }
    }

    #[test]
    fn exp_is_accurate_and_the_same_on_every_path() {
        let mut xs: Vec<f32> = (0..4096).map(|i| -90.0 + i as f32 * 0.0224).collect();
        xs.extend([
            0.0,
            -0.0,
            -1e-30,
            f32::NEG_INFINITY,
            -87.0,
            88.0,
            0.5,
            -0.3466,
            0.3466,
        ]);
        xs.extend([f32::NAN, 1.0, 2.0, -2.0, 10.0, -10.0, -50.0]);
        let want = exps(Isa::Scalar, &xs);
        for (x, y) in xs.iter().zip(&want) {
            if x.is_nan() {
                continue;
            }
            let exact = (*x as f64).clamp(-87.0, 88.0).exp();
            let rel = ((*y as f64) - exact).abs() / exact;
            assert!(rel < 4e-7, "exp({x}) = {y}, want {exact} ({rel:e})");
        }
        for isa in Isa::supported() {
            let got = exps(isa, &xs);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{isa} exp differs from scalar");
        }
    }
}
