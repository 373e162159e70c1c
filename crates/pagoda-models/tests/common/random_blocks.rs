//! Random blocks of any GGUF type Pagoda runs, with small finite values in every f16 scale
//! field (and whole small values for the float types): the kernel tests' and the
//! `quant_prefill` benchmark's weights.

use std::sync::Arc;

use pagoda_gguf::TensorType;
use pagoda_models::quant::{QuantBytes, QuantPart};

/// Random blocks with small finite f16 scales in every scale field.
pub fn random_part(tensor_type: TensorType, rows: usize, cols: usize, seed: u64) -> QuantPart {
    let (values, block) = tensor_type.block().unwrap();
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) as u32
    };
    let blocks = rows * cols / values;
    let mut bytes = Vec::with_capacity(blocks * block);
    for _ in 0..blocks {
        let start = bytes.len();
        bytes.extend((0..block).map(|_| next() as u8));
        let scale = |b: &mut Vec<u8>, at: usize, v: f32| {
            b[start + at..start + at + 2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        };
        let small = |r: u32| (r % 2000) as f32 / 20000.0 - 0.05;
        match tensor_type {
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
            | TensorType::IQ1S => scale(&mut bytes, 0, small(next())),
            TensorType::IQ1M => {
                // `d`'s f16 bits are the top nibbles of the four scale words.
                let bits = half::f16::from_f32(small(next())).to_bits();
                for i in 0..4 {
                    let at = start + 48 + 2 * i;
                    let word = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
                    let word = (word & 0x0FFF) | (((bits >> (4 * i)) & 15) << 12);
                    bytes[at..at + 2].copy_from_slice(&word.to_le_bytes());
                }
            }
            TensorType::Q4_1 | TensorType::Q5_1 => {
                scale(&mut bytes, 0, small(next()));
                scale(&mut bytes, 2, small(next()));
            }
            TensorType::Q4K | TensorType::Q5K => {
                scale(&mut bytes, 0, small(next()));
                scale(&mut bytes, 2, small(next()));
            }
            TensorType::Q6K => scale(&mut bytes, 208, small(next())),
            TensorType::Q2K => {
                scale(&mut bytes, 80, small(next()));
                scale(&mut bytes, 82, small(next()));
            }
            TensorType::Q3K => scale(&mut bytes, 108, small(next())),
            TensorType::F16 | TensorType::BF16 | TensorType::F32 => {
                // Whole values: replace the random bits (NaNs) with small numbers.
                let size = block;
                let v = small(next());
                let b: Vec<u8> = match tensor_type {
                    TensorType::F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
                    TensorType::BF16 => half::bf16::from_f32(v).to_le_bytes().to_vec(),
                    _ => v.to_le_bytes().to_vec(),
                };
                bytes[start..start + size].copy_from_slice(&b);
            }
            TensorType::Other(_) => unreachable!(),
        }
    }
    QuantPart::new(tensor_type, rows, cols, QuantBytes::Owned(Arc::new(bytes))).unwrap()
}
