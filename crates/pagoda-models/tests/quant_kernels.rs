//! The quantized kernels (`kernels/quant_matmul.rs` and the integer kernels under it) on
//! random blocks of every type: each path gives the bits of the lane-chain definition (float
//! products) or of the scalar path (integer products), alone and in any batch. Kept out of
//! the library's unit tests so that the test harness does not compile every type's kernels
//! a second time.

#[path = "common/random_blocks.rs"]
mod random_blocks;

use pagoda_gguf::TensorType;
use pagoda_models::kernels::{quant_matmul_with, SCALAR_DOT};
use pagoda_models::quant::{dequantize_row, QuantMatrix, QuantPart};
use pagoda_models::Isa;
use random_blocks::random_part;

/// The sum of 16 partial sums the kernels use: halves added pairwise, four times.
fn reduce_lanes(lanes: &[f32; 16]) -> f32 {
    let mut v = *lanes;
    let mut width = 8;
    while width > 0 {
        for l in 0..width {
            v[l] += v[l + width];
        }
        width /= 2;
    }
    v[0]
}

/// The definition the kernels meet: per output, 16 in-order chains, then the tree.
fn reference(w: &QuantMatrix, x: &[f32], n: usize) -> Vec<f32> {
    let mut out = vec![0.0; n * w.rows];
    let mut row = vec![0.0; w.cols];
    for r in 0..w.rows {
        w.row_to_f32(r, &mut row);
        for t in 0..n {
            let xs = &x[t * w.cols..(t + 1) * w.cols];
            let mut sums = [0.0f32; 16];
            for (k, (wk, xk)) in row.iter().zip(xs).enumerate() {
                sums[k % 16] = wk.mul_add(*xk, sums[k % 16]);
            }
            out[t * w.rows + r] = reduce_lanes(&sums);
        }
    }
    out
}

const TYPES: [TensorType; 22] = [
    TensorType::IQ2XXS,
    TensorType::IQ2XS,
    TensorType::IQ2S,
    TensorType::IQ3XXS,
    TensorType::IQ3S,
    TensorType::IQ1S,
    TensorType::IQ1M,
    TensorType::IQ4NL,
    TensorType::IQ4XS,
    TensorType::Q2K,
    TensorType::Q3K,
    TensorType::Q4_1,
    TensorType::Q5_0,
    TensorType::Q5_1,
    TensorType::F32,
    TensorType::F16,
    TensorType::BF16,
    TensorType::Q8_0,
    TensorType::Q4_0,
    TensorType::Q4K,
    TensorType::Q5K,
    TensorType::Q6K,
];

fn activations(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2246822519) ^ seed) % 997) as f32 / 498.0 - 1.0)
        .collect()
}

#[test]
fn every_path_equals_the_lane_chain_reference_bitwise() {
    // Widths of one and of three prefill k-blocks (the last one short), row counts off
    // the tiles' sizes, and token counts on both sides of a token block.
    let cases = [
        (512, [1, 5, 37].as_slice(), [1, 2, 3, 4, 9, 17].as_slice()),
        (1280, &[7, 66], &[1, 3, 7, 70]),
    ];
    for tensor_type in TYPES {
        for (cols, row_counts, token_counts) in cases {
            for &rows in row_counts {
                let w = QuantMatrix::new(random_part(tensor_type, rows, cols, rows as u64));
                for &n in token_counts {
                    let x = activations(n * cols, n as u32);
                    let want = reference(&w, &x, n);
                    for isa in Isa::supported() {
                        let mut got = vec![f32::NAN; n * rows];
                        quant_matmul_with(isa, &w, &x, n, &mut got);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{isa} {tensor_type} {rows}x{cols} n={n}");
                    }
                }
            }
        }
    }
}

/// The integer definition in f64: every chunk's dot product of the decoded weights with
/// the activations' 8-bit values times their `dx`. The kernels differ from it only by the
/// f32 rounding of scale products and of their 16 chains.
fn int_reference(w: &QuantMatrix, x: &[f32], n: usize) -> Vec<f64> {
    let mut row = vec![0.0; w.cols];
    let mut out = vec![0.0; n * w.rows];
    for r in 0..w.rows {
        w.row_to_f32(r, &mut row);
        for t in 0..n {
            let xs = &x[t * w.cols..(t + 1) * w.cols];
            let mut sum = 0.0f64;
            for (wc, xc) in row.chunks(32).zip(xs.chunks(32)) {
                let amax = xc.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                let dx = amax / 127.0;
                for (a, b) in wc.iter().zip(xc) {
                    let q = if amax == 0.0 {
                        0.0
                    } else {
                        (b * (127.0 / amax)).round_ties_even()
                    };
                    sum += *a as f64 * q as f64 * dx as f64;
                }
            }
            out[t * w.rows + r] = sum;
        }
    }
    out
}

#[test]
fn integer_products_are_the_same_bits_on_every_path_and_batch_and_near_their_definition() {
    // An odd chunk count (224 = 7 chunks) as well as even ones; with AMX, one and three
    // blocks of 16 tokens, the last one short, and chains of one to three chunks (40
    // chunks: chains 0-7 take three) on one to five row tiles (`quant_int_amx.rs`).
    let cases = [
        (224, [3, 9].as_slice(), [1, 2, 5, 16, 33].as_slice()),
        (512, &[1, 5, 37], &[1, 2, 3, 4, 9, 32]),
        (1280, &[7, 66], &[1, 3, 7, 17]),
    ];
    for tensor_type in TYPES {
        if !QuantPart::has_int_dot(tensor_type) {
            continue;
        }
        for (cols, row_counts, token_counts) in cases {
            if cols % tensor_type.block().unwrap().0 != 0 {
                continue;
            }
            for &rows in row_counts {
                let part = random_part(tensor_type, rows, cols, rows as u64).with_int_dot(true);
                assert!(part.int_dot);
                let w = QuantMatrix::new(part);
                for &n in token_counts {
                    let x = activations(n * cols, n as u32);
                    let mut want = vec![f32::NAN; n * rows];
                    quant_matmul_with(Isa::Scalar, &w, &x, n, &mut want);
                    let exact = int_reference(&w, &x, n);
                    for (i, (g, e)) in want.iter().zip(&exact).enumerate() {
                        let scale: f64 = 1e-5 * (cols as f64).sqrt();
                        assert!(
                            (*g as f64 - e).abs() <= scale * (1.0 + e.abs()),
                            "{tensor_type} {rows}x{cols} n={n} output {i}: {g} vs {e}"
                        );
                    }
                    // Each token alone gives the bits it gets in the batch.
                    let (t, mut alone) = (n - 1, vec![f32::NAN; rows]);
                    quant_matmul_with(Isa::Scalar, &w, &x[t * cols..], 1, &mut alone);
                    assert!(
                        alone
                            .iter()
                            .zip(&want[t * rows..])
                            .all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{tensor_type} alone vs batched n={n}"
                    );
                    for isa in Isa::supported() {
                        let mut got = vec![f32::NAN; n * rows];
                        quant_matmul_with(isa, &w, &x, n, &mut got);
                        let same = got
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{isa} {tensor_type} {rows}x{cols} n={n}");
                    }
                }
            }
        }
    }
}

#[test]
fn dot_product_tiles_give_the_bits_of_the_others_on_any_cpu() {
    // The `-vnni` paths' tiles (decode: 1 and 2 tokens; prefill: 19), run with the scalar
    // path's `wide_dot` and `quad_dots_vnni`, so that a CPU without VNNI checks them too.
    // Other tests running meanwhile may take them as well: they must give the same bits.
    use std::sync::atomic::Ordering;
    // 1312 values end in a quad of one chunk.
    for (tensor_type, cols) in TYPES.into_iter().flat_map(|t| [(t, 1280), (t, 1312)]) {
        let rows = 9;
        if !QuantPart::has_int_dot(tensor_type) || cols % tensor_type.block().unwrap().0 != 0 {
            continue;
        }
        for n in [1, 2, 19] {
            let w = QuantMatrix::new(random_part(tensor_type, rows, cols, 3).with_int_dot(true));
            let x = activations(n * cols, 11);
            let mut want = vec![f32::NAN; n * rows];
            quant_matmul_with(Isa::Scalar, &w, &x, n, &mut want);
            SCALAR_DOT.store(true, Ordering::Relaxed);
            let mut got = vec![f32::NAN; n * rows];
            quant_matmul_with(Isa::Scalar, &w, &x, n, &mut got);
            SCALAR_DOT.store(false, Ordering::Relaxed);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{tensor_type}, {cols} values, {n} tokens");
        }
    }
}

#[test]
fn integer_stacks_of_tile_and_vector_types_give_each_part_its_bits() {
    // A Q8_0 part (on the AMX tiles where the CPU has them) stacked with a Q4_K one (the
    // vector prefill, which reads the activations' second layout): 20 tokens, every path.
    let parts = vec![
        QuantMatrix::new(random_part(TensorType::Q8_0, 18, 256, 5).with_int_dot(true)),
        QuantMatrix::new(random_part(TensorType::Q4K, 11, 256, 6).with_int_dot(true)),
    ];
    let stacked = QuantMatrix::concat_rows(parts.clone());
    let n = 20;
    let x = activations(n * 256, 7);
    for isa in Isa::supported() {
        let mut got = vec![f32::NAN; n * stacked.rows];
        quant_matmul_with(isa, &stacked, &x, n, &mut got);
        let mut col = 0;
        for part in &parts {
            let mut alone = vec![f32::NAN; n * part.rows];
            quant_matmul_with(Isa::Scalar, part, &x, n, &mut alone);
            for t in 0..n {
                let row = &got[t * stacked.rows + col..][..part.rows];
                let same = row
                    .iter()
                    .zip(&alone[t * part.rows..])
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{isa} part at column {col}, token {t}");
            }
            col += part.rows;
        }
    }
}

#[test]
fn stacked_parts_of_different_types_fill_their_own_columns() {
    let parts = vec![
        QuantMatrix::new(random_part(TensorType::Q4K, 20, 256, 1)),
        QuantMatrix::new(random_part(TensorType::Q6K, 7, 256, 2)),
        QuantMatrix::new(random_part(TensorType::F16, 9, 256, 3)),
    ];
    let stacked = QuantMatrix::concat_rows(parts.clone());
    let n = 5;
    let x = activations(n * 256, 4);
    let mut got = vec![0.0; n * stacked.rows];
    quant_matmul_with(Isa::Scalar, &stacked, &x, n, &mut got);
    let mut col = 0;
    for part in &parts {
        let mut alone = vec![0.0; n * part.rows];
        quant_matmul_with(Isa::Scalar, part, &x, n, &mut alone);
        for t in 0..n {
            assert_eq!(
                &got[t * stacked.rows + col..t * stacked.rows + col + part.rows],
                &alone[t * part.rows..(t + 1) * part.rows]
            );
        }
        col += part.rows;
    }
    assert_eq!(col, stacked.rows);
}

#[test]
fn q4_0_and_q5_0_widened_to_q8_0_give_the_same_bits() {
    for tensor_type in [TensorType::Q4_0, TensorType::Q5_0] {
        let part = random_part(tensor_type, 13, 512, 5);
        let wide = part.widened_to_q8_0().unwrap();
        assert_eq!(wide.tensor_type, TensorType::Q8_0);
        let (narrow, wide) = (QuantMatrix::new(part), QuantMatrix::new(wide));
        for n in [1, 2, 9] {
            let x = activations(n * 512, 7);
            for isa in Isa::supported() {
                let mut a = vec![f32::NAN; n * 13];
                let mut b = vec![f32::NAN; n * 13];
                quant_matmul_with(isa, &narrow, &x, n, &mut a);
                quant_matmul_with(isa, &wide, &x, n, &mut b);
                let same = a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "{isa} {tensor_type} n={n}");
            }
        }
    }
    assert!(random_part(TensorType::Q4K, 2, 256, 1)
        .widened_to_q8_0()
        .is_none());
}

#[test]
fn decoded_weights_match_a_plain_product() {
    let w = QuantMatrix::new(random_part(TensorType::Q5K, 6, 256, 9));
    let x = activations(256, 1);
    let mut got = vec![0.0; 6];
    quant_matmul_with(Isa::Scalar, &w, &x, 1, &mut got);
    let mut row = vec![0.0; 256];
    for (r, g) in got.iter().enumerate() {
        dequantize_row(
            TensorType::Q5K,
            &w.parts[0].bytes.as_slice()[r * 176..(r + 1) * 176],
            &mut row,
        );
        let want: f64 = row.iter().zip(&x).map(|(a, b)| *a as f64 * *b as f64).sum();
        assert!(
            (*g as f64 - want).abs() < 1e-4 * (1.0 + want.abs()),
            "row {r}"
        );
    }
}
