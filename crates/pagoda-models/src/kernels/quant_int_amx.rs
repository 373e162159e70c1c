//! Integer prefill on Intel's AMX tiles, for the signed formats without factors or offsets
//! (Q8_0, Q4_0, Q5_0): one `tdpbssd` multiplies 16 tokens' chunk by 16 rows' chunk, giving
//! each (token, row) pair its exact i32 chunk sum, `isum_c` of the definition in
//! `quant_int.rs`. The float step then runs as there, lane for lane, with vectors across 16
//! rows instead of across 16 chunks: chain `k` of an output is the `k`-th accumulator of its
//! token, and the chains' final tree is the same adds, done across accumulators. So the
//! outputs are the bits of every other path.
//!
//! The `A` tile is 16 tokens' quantized activations as `QuantizedActs` holds them (16 x 32
//! bytes, one token's row apart). The rows of a task are decoded once into the `B` layout,
//! 16 rows at a time: per chunk, eight lines of 64 bytes, line `v` holding values
//! `4 v..4 v + 4` of each of the 16 rows. A product's tile row is then one token's sums for
//! 16 consecutive outputs, stored as one vector.
//!
//! Rust has no stable AMX intrinsics, so the five instructions are inline assembly. Tiles hold
//! state the compiler does not see: every kernel configures them on entry and releases them on
//! exit, and nothing between calls into this module touches them.

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::RefCell;
use std::sync::OnceLock;

use super::matmul::OutPtr;
use super::quant_int::{QuantizedActs, GROUP};
use super::quant_matmul::{Call, Task};
use super::quant_prefill::Line;
use super::simd::Avx512;
use crate::quant::formats::{Factors, IntFormat};
use pagoda_gguf::TensorType;

/// Tokens per tile (rows of `A` and of the products) and rows per tile (their columns).
pub(super) const TILE: usize = 16;
/// Bytes of one row tile's chunk in the `B` layout.
pub(super) const TILE_CHUNK_BYTES: usize = 8 * 64;
/// Fewer tokens than this stay on the vector path: a tile's 16 token columns would be
/// mostly padding.
pub(super) const MIN_TOKENS: usize = 16;

/// Linux's `arch_prctl` request for a permission to use an extended state component, and
/// AMX tile data's component number.
const ARCH_REQ_XCOMP_PERM: libc::c_int = 0x1023;
const XFEATURE_XTILEDATA: libc::c_ulong = 18;

/// Whether the CPU has AMX-INT8 and the kernel lets this process use the tiles (Linux grants
/// their 8 KiB of state per process, on request).
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // CPUID leaf 7: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
        let leaf7 = __cpuid_count(7, 0);
        let has = (leaf7.edx >> 24) & 1 == 1 && (leaf7.edx >> 25) & 1 == 1;
        if !has || __cpuid(0).eax < 7 {
            return false;
        }
        // SAFETY: a system call with plain integer arguments; it fails cleanly where the
        // kernel lacks it or refuses.
        cfg!(target_os = "linux")
            && unsafe {
                libc::syscall(
                    libc::SYS_arch_prctl,
                    ARCH_REQ_XCOMP_PERM,
                    XFEATURE_XTILEDATA,
                )
            } == 0
    })
}

/// Whether format `F` runs on the tiles: signed bytes whose chunk sums need no factors and
/// whose values have no offset (`tdpbssd` multiplies signed by signed).
pub(super) fn takes<F: IntFormat>() -> bool {
    F::SIGNED && !F::OFFSET && F::FACTORS == Factors::One
}

/// `takes` for a part's type.
pub(super) fn takes_type(tensor_type: TensorType) -> bool {
    use crate::quant::formats::{Q4_0, Q5_0, Q8_0};
    match tensor_type {
        TensorType::Q8_0 => takes::<Q8_0>(),
        TensorType::Q4_0 => takes::<Q4_0>(),
        TensorType::Q5_0 => takes::<Q5_0>(),
        _ => false,
    }
}

/// The tile configuration (palette 1), two sets: tiles 0 and 1 a token block (16 x 32
/// bytes), 2 and 3 a row tile's chunk (8 x 64 bytes), 4 and 5 their products (16 x 16 i32).
#[repr(C, align(64))]
struct TileConfig {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    bytes_per_row: [u16; 16],
    rows: [u8; 16],
    reserved_end: [u8; 16],
}

const CONFIG: TileConfig = {
    let mut bytes_per_row = [0u16; 16];
    let mut rows = [0u8; 16];
    (bytes_per_row[0], rows[0]) = (32, 16);
    (bytes_per_row[1], rows[1]) = (32, 16);
    (bytes_per_row[2], rows[2]) = (64, 8);
    (bytes_per_row[3], rows[3]) = (64, 8);
    (bytes_per_row[4], rows[4]) = (64, 16);
    (bytes_per_row[5], rows[5]) = (64, 16);
    TileConfig {
        palette: 1,
        start_row: 0,
        reserved: [0; 14],
        bytes_per_row,
        rows,
        reserved_end: [0; 16],
    }
};

/// Per-thread buffers: the task's rows in the `B` layout (`row tiles x chunks x 512`
/// bytes), their scales (per row tile and chunk, 16 rows'), one row's scales as decoded,
/// one token block's chains and two chunks' products.
struct Scratch {
    weights: Vec<Line>,
    scales: Vec<f32>,
    row_scales: Vec<f32>,
    chains: Vec<Line>,
    products: Vec<Line>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch {
            weights: Vec::new(),
            scales: Vec::new(),
            row_scales: Vec::new(),
            chains: Vec::new(),
            products: Vec::new(),
        })
    };
}

/// Rows `task` times every token on the tiles. Only called where `available()` and
/// `takes::<F>()` hold and the activations have their tile layout.
pub(super) fn prefill_task<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    assert!(available() && takes::<F>() && acts.has_tiles());
    assert!(call.cols.is_multiple_of(32) && call.cols / 32 <= acts.groups * GROUP);
    assert!(rows.len() >= task.num_rows * row_bytes);
    SCRATCH.with(|scratch| {
        let scratch = &mut *scratch.borrow_mut();
        let chunks = call.cols / 32;
        let row_tiles = task.num_rows.div_ceil(TILE);
        scratch
            .weights
            .resize(row_tiles * chunks * TILE_CHUNK_BYTES / 64, Line::ZERO);
        scratch.scales.resize(row_tiles * chunks * TILE, 0.0);
        scratch.row_scales.resize(acts.groups * GROUP, 0.0);
        // 16 chains of 16 rows per token of a block, and two tiles of products.
        scratch.chains.resize(TILE * GROUP, Line::ZERO);
        scratch.products.resize(2 * TILE, Line::ZERO);
        // SAFETY: the CPU has AVX-512 and AMX-INT8 with the tiles granted (`available`);
        // the buffers have the sizes above.
        unsafe { prefill::<F>(rows, row_bytes, call, acts, task, out, scratch) }
    })
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn prefill<F: IntFormat>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
) {
    let chunks = call.cols / 32;
    let row_tiles = task.num_rows.div_ceil(TILE);
    let weights = scratch.weights.as_mut_ptr() as *mut u8;
    let scales = scratch.scales.as_mut_ptr();
    let row_scales = scratch.row_scales.as_mut_ptr();
    // One chunk of a row tile, two rows a vector, transposed in registers into the `B`
    // layout (eight gathers from a row-major copy took a third longer). Rows past the task's
    // end are zeros: a row reaches only its own outputs, and those are never stored.
    for tile in 0..row_tiles {
        let present = TILE.min(task.num_rows - tile * TILE);
        let first_row = rows.as_ptr().add(tile * TILE * row_bytes);
        for c in 0..chunks {
            let mut pairs = [_mm512_setzero_si512(); 8];
            for (j, pair) in pairs.iter_mut().enumerate() {
                let mut halves = [_mm256_setzero_si256(); 2];
                for (h, half) in halves.iter_mut().enumerate() {
                    if 2 * j + h < present {
                        *half = F::chunk_q::<Avx512>(first_row.add((2 * j + h) * row_bytes), c);
                    }
                }
                *pair = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(halves[0]), halves[1]);
            }
            let at = weights.add((tile * chunks + c) * TILE_CHUNK_BYTES);
            for (v, line) in rows_to_lines(&pairs).iter().enumerate() {
                _mm512_store_si512(at.add(64 * v) as *mut _, *line);
            }
        }
        let scales = scales.add(tile * chunks * TILE);
        for j in 0..TILE {
            if j < present {
                let mut unused_offsets = [0.0f32; 0];
                let row = first_row.add(j * row_bytes);
                F::scales_into::<Avx512>(row, 0, chunks, row_scales, unused_offsets.as_mut_ptr());
            }
            for c in 0..chunks {
                *scales.add(c * TILE + j) = if j < present { *row_scales.add(c) } else { 0.0 };
            }
        }
    }
    asm!("ldtilecfg [{}]", in(reg) &CONFIG, options(nostack, readonly));
    // Token blocks outer: a block's activations stay in L1/L2 while every row tile of the
    // task (in L2) passes over them. One block per step: its 16 tokens' accumulators already
    // take half the vector registers.
    for block in 0..call.n.div_ceil(TILE) {
        for row_tile in 0..row_tiles {
            row_tile_block(acts, call, task, out, scratch, row_tile, block);
        }
    }
    asm!("tilerelease", options(nostack, nomem));
}

/// Permute indices taking runs of `run` dwords from `first` in each `2 run` of two vectors.
const fn picks(first: i32, run: i32) -> [i32; 16] {
    let mut out = [0; 16];
    let mut i = 0;
    while i < 16 {
        out[i as usize] = first + (i / run) * 2 * run + i % run;
        i += 1;
    }
    out
}

/// `rows_to_lines`' three rounds: the low and high runs of 4, 2 and 1 dwords.
const PICKS: [[i32; 16]; 6] = [
    picks(0, 4),
    picks(4, 4),
    picks(0, 2),
    picks(2, 2),
    picks(0, 1),
    picks(1, 1),
];

/// A row tile's chunk as the `B` layout's eight lines: `pairs[j]` holds rows `2 j` and
/// `2 j + 1` (eight dwords each); line `v` is dword `v` of every row, in row order. Three
/// rounds of two-source permutes, each halving the dwords of a row a vector holds and
/// doubling its rows.
#[inline(always)]
unsafe fn rows_to_lines(pairs: &[__m512i; 8]) -> [__m512i; 8] {
    let load = |i: usize| PICKS[i].as_ptr() as *const __m512i;
    let (low4, high4) = (_mm512_loadu_si512(load(0)), _mm512_loadu_si512(load(1)));
    let (low2, high2) = (_mm512_loadu_si512(load(2)), _mm512_loadu_si512(load(3)));
    let (low1, high1) = (_mm512_loadu_si512(load(4)), _mm512_loadu_si512(load(5)));
    let p = pairs;
    // Four rows each: dwords 0-3 and 4-7 of rows 4i..4i + 4. (Written out: a loop over
    // index pairs here ran the whole prefill 14% slower.)
    let f: [__m512i; 8] = [
        _mm512_permutex2var_epi32(p[0], low4, p[1]),
        _mm512_permutex2var_epi32(p[0], high4, p[1]),
        _mm512_permutex2var_epi32(p[2], low4, p[3]),
        _mm512_permutex2var_epi32(p[2], high4, p[3]),
        _mm512_permutex2var_epi32(p[4], low4, p[5]),
        _mm512_permutex2var_epi32(p[4], high4, p[5]),
        _mm512_permutex2var_epi32(p[6], low4, p[7]),
        _mm512_permutex2var_epi32(p[6], high4, p[7]),
    ];
    // Eight rows each: dwords (0, 1), (2, 3), (4, 5), (6, 7) of rows 0-7, then of rows 8-15.
    let e: [__m512i; 8] = [
        _mm512_permutex2var_epi32(f[0], low2, f[2]),
        _mm512_permutex2var_epi32(f[0], high2, f[2]),
        _mm512_permutex2var_epi32(f[1], low2, f[3]),
        _mm512_permutex2var_epi32(f[1], high2, f[3]),
        _mm512_permutex2var_epi32(f[4], low2, f[6]),
        _mm512_permutex2var_epi32(f[4], high2, f[6]),
        _mm512_permutex2var_epi32(f[5], low2, f[7]),
        _mm512_permutex2var_epi32(f[5], high2, f[7]),
    ];
    [
        _mm512_permutex2var_epi32(e[0], low1, e[4]),
        _mm512_permutex2var_epi32(e[0], high1, e[4]),
        _mm512_permutex2var_epi32(e[1], low1, e[5]),
        _mm512_permutex2var_epi32(e[1], high1, e[5]),
        _mm512_permutex2var_epi32(e[2], low1, e[6]),
        _mm512_permutex2var_epi32(e[2], high1, e[6]),
        _mm512_permutex2var_epi32(e[3], low1, e[7]),
        _mm512_permutex2var_epi32(e[3], high1, e[7]),
    ]
}

/// Token block `block` times row tile `row_tile` of the task: every chunk's products and
/// steps, then the chains' tree and the outputs.
///
/// Chains outer, groups inner: chain `k` takes chunks `k`, `k + 16`, `k + 32`, ... in that
/// order, as in the definition, so its 16 tokens' accumulators stay in registers for the
/// whole chain and are stored once. The products run one chunk ahead on the second set of
/// tiles, so the tile unit multiplies the next chunk while the vector units step this one.
/// Chunks past the row's end are skipped: their step adds `0 * 0` to a chain, and a chain is
/// never -0 (it starts at +0, and a sum that cancels to zero rounds to +0), so that add
/// changes no bit.
#[inline(always)]
unsafe fn row_tile_block(
    acts: &QuantizedActs,
    call: Call,
    task: Task,
    out: OutPtr,
    scratch: &mut Scratch,
    row_tile: usize,
    block: usize,
) {
    let chunks = call.cols / 32;
    let weights = (scratch.weights.as_ptr() as *const u8).add(row_tile * chunks * TILE_CHUNK_BYTES);
    let scales = scratch.scales.as_ptr().add(row_tile * chunks * TILE);
    let (tokens, dx) = acts.tile_rows(block * TILE);
    let (token_bytes, dx_stride) = (acts.token_bytes(), acts.groups * GROUP);
    // Chain `k` of token `m`: 16 rows at `chains + 16 (16 m + k)`.
    let chains = scratch.chains.as_mut_ptr() as *mut f32;
    if chunks < GROUP {
        // Chains with no chunk at all are +0, as the other paths leave them.
        std::ptr::write_bytes(chains, 0, TILE * GROUP * 16);
    }
    // Two tiles of products: the `i`-th chunk stepped goes to `products + 256 (i % 2)`.
    let products = scratch.products.as_mut_ptr() as *mut i32;
    // The next step's output lines, asked for with write intent now: its 16 stores
    // otherwise wait on memory behind every store before them (5-8% of this kernel).
    let (next_block, next_tile) = if (row_tile + 1) * TILE < task.num_rows {
        (block, row_tile + 1)
    } else {
        (block + 1, 0)
    };
    for m in 0..TILE.min(call.n.saturating_sub(next_block * TILE)) {
        let at = out
            .0
            .add((next_block * TILE + m) * call.stride + task.col + next_tile * TILE);
        _mm_prefetch::<_MM_HINT_ET0>(at as *const i8);
    }
    let mut acc = [_mm512_setzero_ps(); TILE];
    let (mut k, mut g, mut parity) = (0, 0, 0);
    multiply::<0>(tokens, token_bytes, weights, 0);
    loop {
        let c = GROUP * g + k;
        // The chunk after `c` in chain order, if any.
        let (mut next_k, mut next_g) = (k, g + 1);
        if GROUP * next_g + next_k >= chunks {
            (next_k, next_g) = (k + 1, 0);
        }
        let has_next = next_k < GROUP.min(chunks);
        if has_next {
            let next = GROUP * next_g + next_k;
            if parity == 0 {
                multiply::<1>(tokens, token_bytes, weights, next);
            } else {
                multiply::<0>(tokens, token_bytes, weights, next);
            }
        }
        let isums = products.add(parity * TILE * TILE);
        if parity == 0 {
            asm!("tilestored [{p} + {s}*1], tmm4", p = in(reg) isums, s = in(reg) 64usize,
                options(nostack));
        } else {
            asm!("tilestored [{p} + {s}*1], tmm5", p = in(reg) isums, s = in(reg) 64usize,
                options(nostack));
        }
        let scale = _mm512_loadu_ps(scales.add(c * TILE));
        for (m, acc) in acc.iter_mut().enumerate() {
            let dx = _mm512_set1_ps(*dx.add(m * dx_stride + c));
            let isum = _mm512_load_si512(isums.add(m * TILE) as *const _);
            *acc = _mm512_fmadd_ps(_mm512_mul_ps(scale, dx), _mm512_cvtepi32_ps(isum), *acc);
        }
        if next_k != k || !has_next {
            for (m, acc) in acc.iter_mut().enumerate() {
                _mm512_store_ps(chains.add((m * GROUP + k) * 16), *acc);
                *acc = _mm512_setzero_ps();
            }
        }
        if !has_next {
            break;
        }
        (k, g, parity) = (next_k, next_g, parity ^ 1);
    }
    // The chains' tree (`reduce_lanes`): chain k takes k + 8, then k + 4, k + 2, k + 1.
    let first = block * TILE;
    let rows = TILE.min(task.num_rows - row_tile * TILE);
    let mask: __mmask16 = if rows == TILE { !0 } else { (1 << rows) - 1 };
    for m in 0..TILE.min(call.n - first) {
        let mut v: [__m512; GROUP] =
            std::array::from_fn(|k| _mm512_load_ps(chains.add((m * GROUP + k) * 16)));
        let mut width = GROUP / 2;
        while width > 0 {
            for l in 0..width {
                v[l] = _mm512_add_ps(v[l], v[l + width]);
            }
            width /= 2;
        }
        let at = out
            .0
            .add((first + m) * call.stride + task.col + row_tile * TILE);
        _mm512_mask_storeu_ps(at, mask, v[0]);
    }
}

/// Chunk `c`'s products of the 16 tokens at `a` (`a_stride` bytes apart) and the row tile
/// whose chunk 0 is at `b` in the `B` layout, into `tmm4` (`SET` 0: tokens in `tmm0`, rows
/// in `tmm2`) or `tmm5` (`SET` 1: `tmm1`, `tmm3`).
#[inline(always)]
unsafe fn multiply<const SET: usize>(a: *const i8, a_stride: usize, b: *const u8, c: usize) {
    let (a, b) = (a.add(32 * c), b.add(TILE_CHUNK_BYTES * c));
    if SET == 0 {
        asm!("tileloadd tmm0, [{a} + {s}*1]", a = in(reg) a, s = in(reg) a_stride,
            options(nostack, readonly));
        asm!("tileloadd tmm2, [{b} + {s}*1]", b = in(reg) b, s = in(reg) 64usize,
            options(nostack, readonly));
        asm!("tilezero tmm4", options(nostack, nomem));
        asm!("tdpbssd tmm4, tmm0, tmm2", options(nostack, nomem));
    } else {
        asm!("tileloadd tmm1, [{a} + {s}*1]", a = in(reg) a, s = in(reg) a_stride,
            options(nostack, readonly));
        asm!("tileloadd tmm3, [{b} + {s}*1]", b = in(reg) b, s = in(reg) 64usize,
            options(nostack, readonly));
        asm!("tilezero tmm5", options(nostack, nomem));
        asm!("tdpbssd tmm5, tmm1, tmm3", options(nostack, nomem));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::Isa;

    #[test]
    fn token_blocks_are_the_tokens_rows_then_zeros_to_a_whole_block() {
        // 33 tokens: three blocks, the last with one token; 224 values: 7 chunks of a group
        // of 16, the rest padding.
        let (n, cols) = (33, 224);
        let x: Vec<f32> = (0..n * cols)
            .map(|i| ((i * 37) % 101) as f32 - 50.0)
            .collect();
        let vector = QuantizedActs::new(Isa::Scalar, &x, n, cols);
        assert!(!vector.has_tiles(), "only the AMX path pads its blocks");
        let acts = QuantizedActs::padded(Isa::Scalar, &x, n, cols, true, true);
        assert!(acts.has_tiles());
        let (bytes, lanes) = (acts.token_bytes(), acts.groups * GROUP);
        for block in 0..n.div_ceil(TILE) {
            let (q, dx) = acts.tile_rows(block * TILE);
            for m in 0..TILE {
                let t = block * TILE + m;
                for i in 0..bytes {
                    // SAFETY: within the padded activations (`tile_rows`).
                    let got = unsafe { *q.add(m * bytes + i) };
                    let want = if t < n {
                        // SAFETY: within token t's bytes.
                        unsafe { *acts.token(t).q.add(i) }
                    } else {
                        0
                    };
                    assert_eq!(got, want, "token {t} byte {i}");
                }
                for c in 0..lanes {
                    // SAFETY: as above.
                    let got = unsafe { *dx.add(m * lanes + c) };
                    // SAFETY: within token t's chunks.
                    let want = if t < n {
                        unsafe { *acts.token(t).dx.add(c) }
                    } else {
                        0.0
                    };
                    assert_eq!(got.to_bits(), want.to_bits(), "token {t} dx {c}");
                }
            }
        }
        // The tokens themselves are what the vector path quantizes.
        // SAFETY: token 32's bytes on both.
        let same =
            (0..bytes).all(|i| unsafe { *acts.token(32).q.add(i) == *vector.token(32).q.add(i) });
        assert!(same);
    }
}
