//! `out[n, rows] = x[n, cols] · Wᵀ` over weights in GGUF block formats (`quant::formats`),
//! read row-major straight from the file's map and decoded in registers, 32 values at a time.
//!
//! Each output keeps 16 partial sums in one vector, sum `l` taking `k = l, l + 16, ...` in
//! order by fused multiply-adds; one fixed tree adds the 16 lanes (`reduce_lanes`). Decode
//! (up to `DECODE_TOKENS` tokens) runs tiles of `R` rows x `T` tokens that decode each chunk
//! in registers once for their `T` tokens; prefill (`quant_prefill.rs`) decodes blocks of
//! rows to f32 once for many tokens. Neither changes how an output is summed, so results are
//! bitwise the same alone or batched, and on every kernel path.

use super::isa::Isa;
use super::matmul::OutPtr;
use super::quant_int::{int_rows_task, QuantizedActs};
use super::quant_prefill::{group_size, prefill_task};
pub use super::simd::reduce_lanes;
use super::simd::{multiversion, prefetch, Simd16};
use crate::quant::formats::{
    Bf16Rows, F16Rows, F32Rows, Format, IQ4NL, IQ4XS, Q2K, Q3K, Q4K, Q4_0, Q4_1, Q5K, Q5_0, Q5_1,
    Q6K, Q8_0,
};
use crate::quant::lattice::{IQ1M, IQ1S, IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS};
use crate::quant::{QuantMatrix, QuantPart};
use pagoda_gguf::TensorType;

/// Batches up to this many tokens use the decode tiles (more rows, fewer tokens).
pub(super) const DECODE_TOKENS: usize = 3;
/// Rows per parallel task, at most: enough tasks to balance a few dozen cores, and in
/// prefill a task's decoded rows and accumulators fit in L2 (`quant_prefill.rs`).
const ROWS_PER_TASK: usize = 64;

/// One task: `num_rows` rows of part `part` from `first_row`, written to output columns
/// from `col`.
#[derive(Clone, Copy)]
pub(super) struct Task {
    part: usize,
    first_row: usize,
    pub(super) num_rows: usize,
    pub(super) col: usize,
}

/// The shapes a task needs besides its rows.
#[derive(Clone, Copy)]
pub(super) struct Call {
    pub(super) cols: usize,
    pub(super) n: usize,
    /// Output row stride: all parts' rows.
    pub(super) stride: usize,
}

pub fn quant_matmul_with(isa: Isa, w: &QuantMatrix, x: &[f32], n: usize, out: &mut [f32]) {
    assert!(isa.is_supported(), "kernel path {isa} not supported here");
    assert_eq!(x.len(), n * w.cols, "matmul input shape");
    assert_eq!(out.len(), n * w.rows, "matmul output shape");
    let call = Call {
        cols: w.cols,
        n,
        stride: w.rows,
    };
    let tasks = plan(w, super::num_threads());
    let acts = w.parts.iter().any(|p| p.int_dot).then(|| {
        let tiles = QuantizedActs::tiles_for(isa, n);
        // The vector prefill's layout of the activations, unless every part uses the tiles.
        let lines = w.parts.iter().any(|p| p.int_dot && !(tiles && on_tiles(p)));
        QuantizedActs::padded(isa, x, n, w.cols, tiles, lines)
    });
    let out = OutPtr(out.as_mut_ptr());
    super::pool::for_each(tasks.len(), |t| {
        let task = tasks[t];
        let part = &w.parts[task.part];
        match &acts {
            Some(acts) if part.int_dot => run_int_task(isa, part, call, acts, task, out),
            _ => run_task(isa, part, call, x, task, out),
        }
    });
}

/// Whether the AMX path takes this part's format (given tiles for the token count).
fn on_tiles(part: &QuantPart) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::quant_int_amx::takes_type(part.tensor_type);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = part;
        false
    }
}

/// Splits every part's rows into tasks: about a multiple of the thread count, each a
/// multiple of 4 rows and at most `ROWS_PER_TASK`.
fn plan(w: &QuantMatrix, threads: usize) -> Vec<Task> {
    let threads = threads.max(1);
    let tasks = threads * w.rows.div_ceil(threads * ROWS_PER_TASK);
    let per_task = w.rows.div_ceil(tasks).next_multiple_of(4);
    let mut tasks = Vec::new();
    let mut col = 0;
    for (index, part) in w.parts.iter().enumerate() {
        let mut first_row = 0;
        while first_row < part.rows {
            let num_rows = per_task.min(part.rows - first_row);
            tasks.push(Task {
                part: index,
                first_row,
                num_rows,
                col: col + first_row,
            });
            first_row += num_rows;
        }
        col += part.rows;
    }
    // Claimed together, tasks lie far apart in the columns (`pool::far_apart`).
    let order = super::pool::far_apart(tasks.len(), threads);
    order.into_iter().map(|i| tasks[i]).collect()
}

/// The bytes of a task's rows, and the bytes per row.
fn task_rows(part: &QuantPart, task: Task) -> (&[u8], usize) {
    let row_bytes = part.row_bytes();
    let start = task.first_row * row_bytes;
    (
        &part.bytes.as_slice()[start..start + task.num_rows * row_bytes],
        row_bytes,
    )
}

fn run_task(isa: Isa, part: &QuantPart, call: Call, x: &[f32], task: Task, out: OutPtr) {
    let (rows, row_bytes) = task_rows(part, task);
    macro_rules! run {
        ($F:ty) => {
            if call.n > DECODE_TOKENS {
                prefill_task::<$F>(isa, rows, row_bytes, call, x, task, out)
            } else {
                rows_task::<$F>(isa, rows, row_bytes, call, x, task, out)
            }
        };
    }
    match part.tensor_type {
        TensorType::F32 => run!(F32Rows),
        TensorType::F16 => run!(F16Rows),
        TensorType::BF16 => run!(Bf16Rows),
        TensorType::Q8_0 => run!(Q8_0),
        TensorType::Q4_0 => run!(Q4_0),
        TensorType::Q4_1 => run!(Q4_1),
        TensorType::Q5_0 => run!(Q5_0),
        TensorType::Q5_1 => run!(Q5_1),
        TensorType::Q2K => run!(Q2K),
        TensorType::Q3K => run!(Q3K),
        TensorType::Q4K => run!(Q4K),
        TensorType::Q5K => run!(Q5K),
        TensorType::Q6K => run!(Q6K),
        TensorType::IQ4NL => run!(IQ4NL),
        TensorType::IQ4XS => run!(IQ4XS),
        TensorType::IQ2XXS => run!(IQ2XXS),
        TensorType::IQ2XS => run!(IQ2XS),
        TensorType::IQ2S => run!(IQ2S),
        TensorType::IQ3XXS => run!(IQ3XXS),
        TensorType::IQ3S => run!(IQ3S),
        TensorType::IQ1S => run!(IQ1S),
        TensorType::IQ1M => run!(IQ1M),
        TensorType::Other(_) => unreachable!("QuantPart::new admits only supported types"),
    }
}

fn run_int_task(
    isa: Isa,
    part: &QuantPart,
    call: Call,
    acts: &QuantizedActs,
    task: Task,
    out: OutPtr,
) {
    let (rows, row_bytes) = task_rows(part, task);
    macro_rules! run {
        ($F:ty) => {
            int_rows_task::<$F>(isa, rows, row_bytes, call, acts, task, out)
        };
    }
    match part.tensor_type {
        TensorType::Q8_0 => run!(Q8_0),
        TensorType::Q4_0 => run!(Q4_0),
        TensorType::Q4_1 => run!(Q4_1),
        TensorType::Q5_0 => run!(Q5_0),
        TensorType::Q5_1 => run!(Q5_1),
        TensorType::Q2K => run!(Q2K),
        TensorType::Q3K => run!(Q3K),
        TensorType::Q4K => run!(Q4K),
        TensorType::Q5K => run!(Q5K),
        TensorType::Q6K => run!(Q6K),
        TensorType::IQ4NL => run!(IQ4NL),
        TensorType::IQ4XS => run!(IQ4XS),
        TensorType::IQ2XXS => run!(IQ2XXS),
        TensorType::IQ2XS => run!(IQ2XS),
        TensorType::IQ2S => run!(IQ2S),
        TensorType::IQ3XXS => run!(IQ3XXS),
        TensorType::IQ3S => run!(IQ3S),
        TensorType::IQ1S => run!(IQ1S),
        TensorType::IQ1M => run!(IQ1M),
        other => unreachable!("QuantPart::with_int_dot admits no {other}"),
    }
}

multiversion!(fn rows_task<F: Format>(
    rows: &[u8], row_bytes: usize, call: Call, x: &[f32], task: Task, out: OutPtr
) = sweep_rows);

/// Decode: every row's chunks decoded in registers, once for the tile's tokens.
#[inline(always)]
unsafe fn sweep_rows<S: Simd16, F: Format>(
    rows: &[u8],
    row_bytes: usize,
    call: Call,
    x: &[f32],
    task: Task,
    out: OutPtr,
) {
    // Tiles by register budget (one accumulator per row and token): 32 vector registers
    // with AVX-512, 16 with AVX2, where one `S` takes two. Several rows at once also keep
    // several streams of weights in flight.
    let max_r = match (S::REGISTERS >= 32, call.n) {
        (true, 1) => 8,
        (true, _) => 4,
        (false, 1) => 4,
        (false, _) => 2,
    };
    let tokens = 0..call.n;
    let mut r = 0;
    while r < task.num_rows {
        let step = group_size(task.num_rows - r, max_r);
        let tile = Tile {
            rows: rows.as_ptr().add(r * row_bytes),
            row_bytes,
            col: task.col + r,
        };
        match step {
            8 if const { S::REGISTERS >= 32 } => {
                over_tokens::<S, F, 8>(tile, call, x, out, tokens.clone())
            }
            4 => over_tokens::<S, F, 4>(tile, call, x, out, tokens.clone()),
            2 => over_tokens::<S, F, 2>(tile, call, x, out, tokens.clone()),
            _ => over_tokens::<S, F, 1>(tile, call, x, out, tokens.clone()),
        }
        r += step;
    }
}

/// The first row of a tile and where its outputs go.
#[derive(Clone, Copy)]
struct Tile {
    rows: *const u8,
    row_bytes: usize,
    col: usize,
}

#[inline(always)]
unsafe fn over_tokens<S: Simd16, F: Format, const R: usize>(
    tile: Tile,
    call: Call,
    x: &[f32],
    out: OutPtr,
    tokens: std::ops::Range<usize>,
) {
    let mut t = tokens.start;
    while t < tokens.end {
        let tt = (tokens.end - t).min(DECODE_TOKENS);
        macro_rules! go {
            ($T:literal) => {{
                debug_assert_eq!(tt, $T);
                tile_kernel::<S, F, R, $T>(tile, call, x, t, out)
            }};
        }
        // The most rows (`sweep_rows`) come with one token only; the `const` condition keeps
        // their other shapes, each a whole copy of the tile, from being compiled at all.
        if const { R == 8 || (R == 4 && S::REGISTERS < 32) } {
            go!(1)
        } else {
            match tt {
                3 => go!(3),
                2 => go!(2),
                _ => go!(1),
            }
        }
        t += tt;
    }
}

/// Rows `R` x tokens `T`: each chunk of each row decoded once for its `T` tokens; values
/// 0-15 and then 16-31 of each chunk go into the output's one accumulator.
#[inline(always)]
unsafe fn tile_kernel<S: Simd16, F: Format, const R: usize, const T: usize>(
    tile: Tile,
    call: Call,
    x: &[f32],
    t: usize,
    out: OutPtr,
) {
    let xp = x.as_ptr().add(t * call.cols);
    let mut acc = [[S::zero(); R]; T];
    // The next tile's rows are fetched while this one computes (its rows are short streams,
    // too short for the hardware prefetcher to get ahead of).
    let chunks = call.cols / 32;
    let tile_bytes = R * tile.row_bytes;
    let ahead_step = tile_bytes.div_ceil(chunks).next_multiple_of(64);
    // Plain loops, not closures: a closure is compiled without the path's target features.
    for c in 0..chunks {
        let ahead = tile.rows.wrapping_add(tile_bytes + c * ahead_step);
        let mut line = 0;
        while line < ahead_step {
            prefetch(ahead.wrapping_add(line));
            line += 64;
        }
        for i in 0..R {
            let (w0, w1) = F::decode32::<S>(tile.rows.add(i * tile.row_bytes), c);
            for (j, row) in acc.iter_mut().enumerate() {
                let xs = xp.add(j * call.cols + 32 * c);
                row[i] = S::fma(w0, S::load(xs), row[i]);
                row[i] = S::fma(w1, S::load(xs.add(16)), row[i]);
            }
        }
    }
    for (j, row) in acc.iter().enumerate() {
        for (i, a) in row.iter().enumerate() {
            *out.0.add((t + j) * call.stride + tile.col + i) = a.reduce();
        }
    }
}
