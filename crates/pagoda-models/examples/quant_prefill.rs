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
use std::sync::Arc;
use std::time::Instant;

use pagoda_gguf::TensorType;
use pagoda_models::aligned::AlignedVec;
use pagoda_models::kernels::{matmul_with, quant_matmul_with};
use pagoda_models::matrix::Matrix;
use pagoda_models::packed::PackedMatrix;
use pagoda_models::quant::{QuantBytes, QuantMatrix, QuantPart};
use pagoda_models::WeightDtype;

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

/// Random blocks whose f16 scale fields hold small finite values.
fn random_part(tensor_type: TensorType, rows: usize, cols: usize, seed: u64) -> QuantPart {
    let (values, block) = tensor_type.block().expect("a supported type");
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let mut bytes = Vec::with_capacity(rows * cols / values * block);
    let f16_bytes = |v: f32| half::f16::from_f32(v).to_le_bytes();
    for _ in 0..rows * cols / values {
        let start = bytes.len();
        bytes.extend((0..block).map(|_| next() as u8));
        let small = (next() % 1000) as f32 / 40000.0;
        let fields: &[usize] = match tensor_type {
            TensorType::Q8_0
            | TensorType::Q4_0
            | TensorType::Q5_0
            | TensorType::IQ4NL
            | TensorType::IQ4XS
            | TensorType::IQ2XXS
            | TensorType::IQ2XS
            | TensorType::IQ2S
            | TensorType::IQ3XXS
            | TensorType::IQ3S
            | TensorType::IQ1S => &[0],
            TensorType::Q4K | TensorType::Q5K => &[0, 2],
            TensorType::Q6K => &[208],
            TensorType::Q2K => &[80, 82],
            TensorType::Q3K => &[108],
            _ => &[],
        };
        for &at in fields {
            bytes[start + at..start + at + 2].copy_from_slice(&f16_bytes(small));
        }
        if tensor_type == TensorType::IQ1M {
            // `d`'s f16 bits are the top nibbles of the four scale words.
            let bits = half::f16::from_f32(small).to_bits();
            for i in 0..4 {
                let at = start + 48 + 2 * i;
                bytes[at + 1] = (bytes[at + 1] & 15) | ((((bits >> (4 * i)) & 15) as u8) << 4);
            }
        }
        if tensor_type == TensorType::F16 {
            bytes[start..start + 2].copy_from_slice(&f16_bytes(small - 0.0125));
        }
    }
    QuantPart::new(tensor_type, rows, cols, QuantBytes::Owned(Arc::new(bytes)))
        .expect("whole blocks")
}
