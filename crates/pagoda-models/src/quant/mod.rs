//! Weights kept in a GGUF file's own block formats, read in place from the memory map
//! (`formats.rs` decodes them; `kernels::quant_matmul` multiplies by them).

pub mod formats;
mod iq_grids;
pub mod lattice;

use std::sync::Arc;

use memmap2::Mmap;
use pagoda_gguf::TensorType;
use rayon::prelude::*;

use crate::kernels::simd::{Scalar, Simd16};
use crate::matrix::MatrixData;
use crate::packed::PackedMatrix;
use formats::{
    Bf16Rows, F16Rows, F32Rows, Format, IQ4NL, IQ4XS, Q2K, Q3K, Q4K, Q4_0, Q4_1, Q5K, Q5_0, Q5_1,
    Q6K, Q8_0,
};
use lattice::{IQ1M, IQ1S, IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS};

/// Where a part's bytes live: in the file's map, in the copy of the file's quantized
/// tensors made at load (`QuantPages::Auto`), or (rows reordered at load) in memory.
#[derive(Clone)]
pub enum QuantBytes {
    Mapped {
        map: Arc<Mmap>,
        offset: usize,
        len: usize,
    },
    Copied {
        copy: Arc<Vec<u8>>,
        offset: usize,
        len: usize,
    },
    Owned(Arc<Vec<u8>>),
}

impl QuantBytes {
    pub fn as_slice(&self) -> &[u8] {
        match self {
            QuantBytes::Mapped { map, offset, len } => &map[*offset..*offset + *len],
            QuantBytes::Copied { copy, offset, len } => &copy[*offset..*offset + *len],
            QuantBytes::Owned(v) => v,
        }
    }
}

impl std::fmt::Debug for QuantBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuantBytes::Mapped { len, .. } => write!(f, "Mapped({len} bytes)"),
            QuantBytes::Copied { len, .. } => write!(f, "Copied({len} bytes)"),
            QuantBytes::Owned(v) => write!(f, "Owned({} bytes)", v.len()),
        }
    }
}

/// One row-major `[rows, cols]` tensor in one type.
#[derive(Debug, Clone)]
pub struct QuantPart {
    pub tensor_type: TensorType,
    pub rows: usize,
    pub cols: usize,
    pub bytes: QuantBytes,
    /// Multiplied in integers by 8-bit activations (`kernels::quant_int`) rather than decoded
    /// to f32: set by `with_int_dot` for the types that have integer kernels.
    pub int_dot: bool,
}

impl QuantPart {
    /// Checks that `bytes` hold exactly `rows` rows of `cols` values of `tensor_type`.
    pub fn new(
        tensor_type: TensorType,
        rows: usize,
        cols: usize,
        bytes: QuantBytes,
    ) -> Result<QuantPart, String> {
        let (values, block) = tensor_type
            .block()
            .ok_or_else(|| format!("tensor type {tensor_type} is not supported"))?;
        if !cols.is_multiple_of(values) || !cols.is_multiple_of(32) {
            return Err(format!(
                "rows of {cols} values are not whole {tensor_type} blocks of 32"
            ));
        }
        let want = rows * (cols / values) * block;
        if bytes.as_slice().len() != want {
            return Err(format!("{} bytes, expected {want}", bytes.as_slice().len()));
        }
        Ok(QuantPart {
            tensor_type,
            rows,
            cols,
            bytes,
            int_dot: false,
        })
    }

    /// Integer products on (for the block types that have them: every quantized type) or off.
    pub fn with_int_dot(mut self, on: bool) -> QuantPart {
        self.int_dot = on && Self::has_int_dot(self.tensor_type);
        self
    }

    /// Whether integer kernels exist for the type (every block type; the float types take
    /// f32 activations).
    pub fn has_int_dot(tensor_type: TensorType) -> bool {
        !matches!(
            tensor_type,
            TensorType::F32 | TensorType::F16 | TensorType::BF16 | TensorType::Other(_)
        )
    }

    /// A packed float matrix back in rows (when it is stacked with GGUF blocks).
    pub fn from_packed(m: &PackedMatrix) -> QuantPart {
        let (tensor_type, bytes): (TensorType, Vec<u8>) = match m.unpack().data {
            MatrixData::F32(v) => (TensorType::F32, bytemuck::cast_slice(&v).to_vec()),
            MatrixData::F16(v) => (TensorType::F16, bytemuck::cast_slice(&v).to_vec()),
            MatrixData::BF16(v) => (TensorType::BF16, bytemuck::cast_slice(&v).to_vec()),
        };
        QuantPart::new(
            tensor_type,
            m.rows,
            m.cols,
            QuantBytes::Owned(Arc::new(bytes)),
        )
        .expect("a stack's widths are whole chunks (its GGUF parts are)")
    }

    /// Q4_0 and Q5_0 blocks rewritten as Q8_0 blocks of the same values: the scale kept, each
    /// value `q - 8` or `q - 16` as a signed byte, so `d * q` is the same f32 and every
    /// product the same bits. Other types: `None`.
    pub fn widened_to_q8_0(&self) -> Option<QuantPart> {
        let (offset, qh_bytes) = match self.tensor_type {
            TensorType::Q4_0 => (8i8, 0),
            TensorType::Q5_0 => (16i8, 4),
            _ => return None,
        };
        let (_, block) = self.tensor_type.block().expect("checked in new");
        let src = self.bytes.as_slice();
        let mut out = vec![0u8; src.len() / block * 34];
        out.par_chunks_exact_mut(34)
            .zip(src.par_chunks_exact(block))
            .for_each(|(o, b)| {
                o[..2].copy_from_slice(&b[..2]);
                let high = if qh_bytes == 4 {
                    u32::from_le_bytes([b[2], b[3], b[4], b[5]])
                } else {
                    0
                };
                let qs = &b[2 + qh_bytes..];
                for (i, v) in o[2..].iter_mut().enumerate() {
                    let nibble = if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 };
                    let fifth = (((high >> i) & 1) as u8) << 4;
                    *v = ((nibble | fifth) as i8 - offset) as u8;
                }
            });
        Some(
            QuantPart::new(
                TensorType::Q8_0,
                self.rows,
                self.cols,
                QuantBytes::Owned(Arc::new(out)),
            )
            .expect("one Q8_0 block per source block"),
        )
    }

    pub fn row_bytes(&self) -> usize {
        let (values, block) = self.tensor_type.block().expect("checked in new");
        self.cols / values * block
    }

    pub fn size_in_bytes(&self) -> usize {
        self.bytes.as_slice().len()
    }

    /// Row `row` as f32: the values the kernels multiply by.
    pub fn row_to_f32(&self, row: usize, out: &mut [f32]) {
        assert!(
            row < self.rows && out.len() == self.cols,
            "quant row lookup"
        );
        let bytes = &self.bytes.as_slice()[row * self.row_bytes()..(row + 1) * self.row_bytes()];
        dequantize_row(self.tensor_type, bytes, out);
    }
}

/// Parts stacked by rows (fused q/k/v or gate/up may mix types, as Q4_K_M files do).
#[derive(Debug, Clone)]
pub struct QuantMatrix {
    pub rows: usize,
    pub cols: usize,
    pub parts: Vec<QuantPart>,
}

impl QuantMatrix {
    pub fn new(part: QuantPart) -> QuantMatrix {
        QuantMatrix {
            rows: part.rows,
            cols: part.cols,
            parts: vec![part],
        }
    }

    pub fn concat_rows(parts: Vec<QuantMatrix>) -> QuantMatrix {
        let cols = parts[0].cols;
        assert!(
            parts.iter().all(|p| p.cols == cols),
            "stacked widths differ"
        );
        QuantMatrix {
            rows: parts.iter().map(|p| p.rows).sum(),
            cols,
            parts: parts.into_iter().flat_map(|p| p.parts).collect(),
        }
    }

    pub fn size_in_bytes(&self) -> usize {
        self.parts.iter().map(QuantPart::size_in_bytes).sum()
    }

    pub fn row_to_f32(&self, mut row: usize, out: &mut [f32]) {
        for part in &self.parts {
            if row < part.rows {
                return part.row_to_f32(row, out);
            }
            row -= part.rows;
        }
        panic!("quant row lookup past the last row");
    }

    /// The types held, for reports (`Q4_K+Q6_K`).
    pub fn type_names(&self) -> String {
        let mut names: Vec<String> = self.parts.iter().map(|p| p.tensor_type.name()).collect();
        names.dedup();
        names.join("+")
    }
}

/// Decodes one row of `tensor_type` blocks into `out` (the reference the kernels meet).
pub fn dequantize_row(tensor_type: TensorType, bytes: &[u8], out: &mut [f32]) {
    fn run<F: Format>(bytes: &[u8], out: &mut [f32]) {
        assert_eq!(bytes.len(), out.len() / F::VALUES * F::BYTES, "row bytes");
        assert_eq!(out.len() % 32, 0, "rows are whole chunks of 32");
        for (c, chunk) in out.chunks_exact_mut(32).enumerate() {
            // SAFETY: the row holds every chunk (checked above); the scalar path runs anywhere.
            unsafe {
                let (a, b) = F::decode32::<Scalar>(bytes.as_ptr(), c);
                a.store(chunk.as_mut_ptr());
                b.store(chunk.as_mut_ptr().add(16));
            }
        }
    }
    match tensor_type {
        TensorType::F32 => run::<F32Rows>(bytes, out),
        TensorType::F16 => run::<F16Rows>(bytes, out),
        TensorType::BF16 => run::<Bf16Rows>(bytes, out),
        TensorType::Q8_0 => run::<Q8_0>(bytes, out),
        TensorType::Q4_0 => run::<Q4_0>(bytes, out),
        TensorType::Q4_1 => run::<Q4_1>(bytes, out),
        TensorType::Q5_0 => run::<Q5_0>(bytes, out),
        TensorType::Q5_1 => run::<Q5_1>(bytes, out),
        TensorType::Q2K => run::<Q2K>(bytes, out),
        TensorType::Q3K => run::<Q3K>(bytes, out),
        TensorType::Q4K => run::<Q4K>(bytes, out),
        TensorType::Q5K => run::<Q5K>(bytes, out),
        TensorType::Q6K => run::<Q6K>(bytes, out),
        TensorType::IQ4NL => run::<IQ4NL>(bytes, out),
        TensorType::IQ4XS => run::<IQ4XS>(bytes, out),
        TensorType::IQ2XXS => run::<IQ2XXS>(bytes, out),
        TensorType::IQ2XS => run::<IQ2XS>(bytes, out),
        TensorType::IQ2S => run::<IQ2S>(bytes, out),
        TensorType::IQ3XXS => run::<IQ3XXS>(bytes, out),
        TensorType::IQ3S => run::<IQ3S>(bytes, out),
        TensorType::IQ1S => run::<IQ1S>(bytes, out),
        TensorType::IQ1M => run::<IQ1M>(bytes, out),
        TensorType::Other(_) => panic!("tensor type {tensor_type} reached the kernels"),
    }
}
