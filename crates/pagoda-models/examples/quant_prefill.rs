//! The quantized prefill matmul alone: one Qwen2.5-0.5B-shaped layer's four products (fused
//! q/k/v, o, fused gate/up, down) over random blocks of one GGUF type, for a batch of tokens,
//! as GFLOP/s. Tells how far the kernel is from the float kernels' rate without the rest of
//! the forward pass around it.
//!
//!     cargo run --release -p pagoda-models --example quant_prefill -- [TYPE] [TOKENS] [ROUNDS]
//!
//! TYPE: q8_0 (default), q4_0, q5_0, q4_k, q5_k, q6_k, q2_k, q3_k, iq4_nl, iq4_xs, f16; `packed` runs the float kernel on
//! the same shapes in f16 panels (the rate the quantized kernel is measured against).
//! Products in integers as `--quant-dot int8` (the default) multiplies them;
//! `PAGODA_QUANT_DOT=exact` runs the f32 kernels instead. TOKENS 1 is decode. `LAYERS=24`
//! spreads the products over a whole model's bytes; `HIDDEN=1024` (say) sets the width of
//! the rows that are 896 in that model; `ONLY=3` (say) runs that product alone (0 q/k/v, 1 o,
//! 2 gate/up, 3 down).
use std::time::Instant;

use pagoda_gguf::TensorType;
use pagoda_models::aligned::AlignedVec;
use pagoda_models::kernels::{matmul_with, quant_matmul_with};
use pagoda_models::matrix::Matrix;
use pagoda_models::packed::PackedMatrix;
use pagoda_models::quant::QuantMatrix;
use pagoda_models::WeightDtype;

#[path = "../tests/common/random_blocks.rs"]
mod random_blocks;
use random_blocks::random_part;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args.first().map(String::as_str).unwrap_or("q8_0");
    let packed = name == "packed";
    let wanted = if packed { "f16" } else { name };
    // Any type Pagoda runs, by ggml's name in lower case (`q4_k`, `iq3_xxs`).
    let Some(tensor_type) = (0..64)
        .map(TensorType::from_id)
        .find(|t| t.block().is_some() && t.name().to_lowercase() == wanted)
    else {
        eprintln!("unknown type {wanted}");
        std::process::exit(2);
    };
    let number = |i: usize, default: usize| {
        args.get(i)
            .map(|a| a.parse().unwrap_or(default))
            .unwrap_or(default)
    };
    let tokens = number(1, 512);
    // The integer kernels, as `--quant-dot` defaults to them; PAGODA_QUANT_DOT=exact for f32.
    let int8 = std::env::var("PAGODA_QUANT_DOT").map_or(true, |v| v != "exact");
    let rounds = number(2, 5);
    // 896-wide rows are not whole 256-value super-blocks: K-quant files keep those in other
    // types, so K-quants here use the 1024-wide stand-in shapes.
    let k_quant = tensor_type.block().map(|(v, _)| v) == Some(256);
    let hidden = std::env::var("HIDDEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if k_quant { 1024 } else { 896 });
    let ffn = 4864;
    let all_shapes = [
        (hidden + 256, hidden),
        (hidden, hidden),
        (2 * ffn, hidden),
        (hidden, ffn),
    ];
    let shapes: Vec<(usize, usize)> = match std::env::var("ONLY")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(i) => all_shapes.get(i).into_iter().copied().collect(),
        None => all_shapes.to_vec(),
    };
    let panels: Vec<PackedMatrix> = if packed {
        shapes
            .iter()
            .map(|&(r, c)| {
                let v = (0..r * c)
                    .map(|j| ((j * 31) % 101) as f32 / 4040.0)
                    .collect();
                PackedMatrix::pack(&Matrix::from_f32(r, c, v, WeightDtype::F16))
            })
            .collect()
    } else {
        Vec::new()
    };
    // LAYERS=24 spreads the products over a whole model's bytes (far more than the caches
    // hold), as decode reads them.
    let layers: usize = std::env::var("LAYERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let mats: Vec<QuantMatrix> = (0..layers)
        .flat_map(|_| shapes.iter().enumerate())
        .map(|(i, &(r, c))| {
            QuantMatrix::new(random_part(tensor_type, r, c, i as u64 + 1).with_int_dot(int8))
        })
        .collect();
    let flops: f64 = layers as f64
        * shapes
            .iter()
            .map(|&(r, c)| 2.0 * (r * c * tokens) as f64)
            .sum::<f64>();
    let isa = pagoda_models::kernels::isa();
    let x: Vec<f32> = (0..tokens * ffn)
        .map(|i| ((i * 37) % 101) as f32 / 101.0 - 0.5)
        .collect();
    // On cache lines, as the forward pass holds its products.
    let mut out = AlignedVec::<f32>::zeroed(tokens * 2 * ffn);
    let mut results = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        rayon::scope(|_| {
            for m in &panels {
                matmul_with(
                    isa,
                    m,
                    &x[..tokens * m.cols],
                    tokens,
                    &mut out[..tokens * m.rows],
                );
            }
            for m in mats.iter().filter(|_| !packed) {
                quant_matmul_with(
                    isa,
                    m,
                    &x[..tokens * m.cols],
                    tokens,
                    &mut out[..tokens * m.rows],
                );
            }
        });
        results.push(flops / t.elapsed().as_secs_f64() / 1e9);
    }
    results.sort_by(f64::total_cmp);
    let tensor_type = if packed {
        "packed f16".to_string()
    } else {
        tensor_type.to_string()
    };
    println!(
        "{tensor_type} x {tokens} tokens ({isa}, {} threads): median {:.1} GFLOP/s (min {:.1} max {:.1})",
        rayon::current_num_threads(),
        results[results.len() / 2],
        results[0],
        results[results.len() - 1]
    );
}
