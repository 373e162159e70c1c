//! The decode matmul alone: batch-1 products over the f16 matrices of a Qwen2.5-0.5B-shaped
//! model's 24 layers (far more bytes than the caches hold), as GB/s of weights streamed. Set
//! beside `read_bandwidth` it tells how close the kernel is to the memory's limit.
//!
//!     cargo run --release -p pagoda-models --example matmul_bandwidth -- [ROUNDS]
use pagoda_models::kernels::matmul_with;
use pagoda_models::matrix::Matrix;
use pagoda_models::packed::PackedMatrix;
use pagoda_models::{Isa, WeightDtype};
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("ROUNDS is a number"))
        .collect();
    let rounds = args.first().copied().unwrap_or(5);
    let shapes = [(1152, 896), (896, 896), (9728, 896), (896, 4864)];
    let mut mats = Vec::new();
    for l in 0..24 {
        for (i, &(r, c)) in shapes.iter().enumerate() {
            let v: Vec<f32> = (0..r * c)
                .map(|j| ((j * 31 + l * 7 + i) % 101) as f32 / 101.0 - 0.5)
                .collect();
            mats.push(PackedMatrix::pack(&Matrix::from_f32(
                r,
                c,
                v,
                WeightDtype::F16,
            )));
        }
    }
    let bytes: usize = mats.iter().map(|m| m.size_in_bytes()).sum();
    let isa = Isa::best();
    let mut x = vec![0.1f32; 4864];
    let mut out = vec![0.0f32; 9728];
    let mut results = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        rayon::scope(|_| {
            for _ in 0..3 {
                for m in &mats {
                    matmul_with(isa, m, &x[..m.cols], 1, &mut out[..m.rows]);
                    x[0] = out[0] * 1e-9 + 0.1;
                }
            }
        });
        results.push(3.0 * bytes as f64 / t.elapsed().as_secs_f64() / 1e9);
    }
    let r = &mut results;
    r.sort_by(f64::total_cmp);
    println!(
        "decode matmul ({isa}): median {:.1} GB/s (min {:.1} max {:.1}) over {} MB, {} threads",
        r[r.len() / 2],
        r[0],
        r[r.len() - 1],
        bytes >> 20,
        rayon::current_num_threads()
    );
}
