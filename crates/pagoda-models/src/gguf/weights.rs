//! Tensors of a GGUF file by Hugging Face name. Float matrices are packed like safetensors
//! weights; quantized ones stay in the map in their own blocks. Llama files store q/k rows
//! with each head's two rotary halves interleaved (llama.cpp's rotary layout): those rows are
//! put back in Hugging Face order at load, still quantized.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use half::{bf16, f16};
use pagoda_gguf::{GgufFile, TensorInfo, TensorType};

use super::names::gguf_name;
use crate::config::{Architecture, ModelConfig};
use crate::error::{ModelError, Result};
use crate::matrix::{Matrix, MatrixData, WeightDtype};
use crate::packed::{huge_page_vec, PackedMatrix};
use crate::quant::{QuantBytes, QuantMatrix, QuantPart};
use crate::weight_matrix::WeightMatrix;
use crate::weights::WeightSource;

pub struct GgufWeights {
    file: Arc<GgufFile>,
    /// Heads of q and of k, for llama files (whose q/k rows are interleaved).
    interleaved_heads: Option<(usize, usize)>,
    /// Q4_0/Q5_0 matrices widened to Q8_0 (`QuantRepack`).
    widen_to_q8_0: bool,
    /// Bytes of the widened copies, for the load log.
    widened_bytes: AtomicUsize,
    /// Quantized matrices multiplied in integers (`QuantDot::Int8`).
    int_dot: bool,
    /// The quantized matrices read from a copy (`QuantPages::Auto`), if any.
    copies: Option<Copies>,
}

/// Quantized matrices copied out of the map into one buffer backed by 2 MiB pages, in file
/// order (so one matrix's rows run on into the next's), each from a 64-byte boundary.
struct Copies {
    bytes: Arc<Vec<u8>>,
    /// Where each tensor (by GGUF name) starts in `bytes`.
    starts: HashMap<String, usize>,
}

impl Copies {
    /// The file's quantized matrices that `keep` accepts, or `None` when there are none.
    fn of(file: &GgufFile, keep: impl Fn(&TensorInfo) -> bool) -> Option<Copies> {
        let mut infos: Vec<&TensorInfo> = file
            .tensors()
            .filter(|t| t.tensor_type.is_quantized() && t.dims.len() == 2 && t.size.is_some())
            .filter(|t| keep(t))
            .collect();
        infos.sort_by_key(|t| t.offset);
        let mut starts = HashMap::with_capacity(infos.len());
        let mut len = 0;
        for t in &infos {
            starts.insert(t.name.clone(), len);
            len += t.size.expect("filtered").next_multiple_of(64);
        }
        if len == 0 {
            return None;
        }
        let mut bytes = huge_page_vec(len, 0u8);
        for t in &infos {
            let src = file.tensor_bytes(t).expect("filtered");
            bytes[starts[&t.name]..][..src.len()].copy_from_slice(src);
        }
        Some(Copies {
            bytes: Arc::new(bytes),
            starts,
        })
    }
}

impl GgufWeights {
    /// `copy`: read the quantized matrices from a copy in 2 MiB pages (`QuantPages::Auto`)
    /// rather than from the map.
    pub fn new(
        file: Arc<GgufFile>,
        config: &ModelConfig,
        widen_to_q8_0: bool,
        int_dot: bool,
        copy: bool,
    ) -> GgufWeights {
        let interleaved_heads = matches!(config.architecture, Architecture::Llama)
            .then_some((config.num_heads, config.num_kv_heads));
        // Not the matrices replaced at load anyway: widened ones, and llama's q/k (rows
        // reordered into memory of their own).
        let copies = copy
            .then(|| {
                Copies::of(&file, |t| {
                    let widened = widen_to_q8_0
                        && matches!(t.tensor_type, TensorType::Q4_0 | TensorType::Q5_0);
                    let reordered = interleaved_heads.is_some()
                        && (t.name.ends_with("attn_q.weight") || t.name.ends_with("attn_k.weight"));
                    !widened && !reordered
                })
            })
            .flatten();
        GgufWeights {
            file,
            interleaved_heads,
            widen_to_q8_0,
            widened_bytes: AtomicUsize::new(0),
            int_dot,
            copies,
        }
    }

    /// Bytes of quantized matrices read from the copy in 2 MiB pages.
    pub fn copied_bytes(&self) -> usize {
        self.copies.as_ref().map_or(0, |c| c.bytes.len())
    }

    /// Bytes held in Q4_0/Q5_0 matrices widened to Q8_0 so far.
    pub fn widened_bytes(&self) -> usize {
        self.widened_bytes.load(Ordering::Relaxed)
    }

    /// The dtype float weights are held in: that of the embeddings when they are float,
    /// f16 otherwise (which is what `--kv-cache-dtype auto` then picks).
    pub fn dtype(&self) -> WeightDtype {
        match self.file.tensor("token_embd.weight").map(|t| t.tensor_type) {
            Some(TensorType::F32) => WeightDtype::F32,
            Some(TensorType::BF16) => WeightDtype::BF16,
            _ => WeightDtype::F16,
        }
    }

    fn info(&self, name: &str) -> Result<&TensorInfo> {
        gguf_name(name)
            .and_then(|g| self.file.tensor(&g))
            .ok_or_else(|| ModelError::MissingTensor {
                name: format!("{name} ({})", gguf_name(name).unwrap_or_default()),
            })
    }

    fn checked(&self, name: &str, shape: &[usize]) -> Result<&TensorInfo> {
        let info = self.info(name)?;
        if info.shape() != shape {
            return Err(ModelError::WrongShape {
                name: info.name.clone(),
                expected: shape.to_vec(),
                actual: info.shape(),
            });
        }
        if info.tensor_type.block().is_none() {
            return Err(unsupported(info));
        }
        Ok(info)
    }

    /// Heads whose rows must be de-interleaved for `name`, if any.
    fn row_heads(&self, name: &str) -> Option<usize> {
        let (q, k) = self.interleaved_heads?;
        if name.ends_with("q_proj.weight") || name.ends_with("q_proj.bias") {
            Some(q)
        } else if name.ends_with("k_proj.weight") || name.ends_with("k_proj.bias") {
            Some(k)
        } else {
            None
        }
    }
}

fn unsupported(info: &TensorInfo) -> ModelError {
    ModelError::UnsupportedTensorType {
        name: info.name.clone(),
        tensor_type: info.tensor_type.name(),
    }
}

/// For Hugging Face row `r` of a `rows`-row q/k matrix over `heads` heads, the GGUF row
/// holding it: within a head, HF keeps the rotary halves apart (`s * half + p`), GGUF
/// interleaves them (`2p + s`).
fn interleaved_row(r: usize, rows: usize, heads: usize) -> usize {
    let head_dim = rows / heads;
    let half = head_dim / 2;
    let (head, i) = (r / head_dim, r % head_dim);
    head * head_dim + 2 * (i % half) + i / half
}

/// Rows reordered to Hugging Face order (any row width in bytes).
fn deinterleave(bytes: &[u8], rows: usize, heads: usize) -> Vec<u8> {
    let row_bytes = bytes.len() / rows;
    let mut out = Vec::with_capacity(bytes.len());
    for r in 0..rows {
        let src = interleaved_row(r, rows, heads);
        out.extend_from_slice(&bytes[src * row_bytes..(src + 1) * row_bytes]);
    }
    out
}

/// A float tensor's values as f32 (norm weights, biases, rope factors).
pub(crate) fn float_values(file: &GgufFile, info: &TensorInfo) -> Result<Vec<f32>> {
    let bytes = file.tensor_bytes(info).ok_or_else(|| unsupported(info))?;
    let values = match info.tensor_type {
        TensorType::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        TensorType::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        TensorType::BF16 => bytes
            .chunks_exact(2)
            .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        // llama.cpp writes vectors (norms, biases) as F32; one quantized anyway is decoded
        // as the matrices' blocks are (the parser checked it holds whole blocks).
        TensorType::Other(_) => return Err(unsupported(info)),
        quantized => {
            let (per_block, block_bytes) = quantized.block().expect("a known type");
            let mut values = vec![0.0; bytes.len() / block_bytes * per_block];
            crate::quant::dequantize_row(quantized, bytes, &mut values);
            values
        }
    };
    Ok(values)
}

impl WeightSource for GgufWeights {
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix> {
        let info = self.checked(name, &[rows, cols])?;
        let mut bytes = self.file.tensor_bytes(info).expect("known type").to_vec();
        if let Some(heads) = self.row_heads(name) {
            bytes = deinterleave(&bytes, rows, heads);
        }
        let data = match info.tensor_type {
            TensorType::F32 => MatrixData::F32(bytemuck::pod_collect_to_vec(&bytes)),
            TensorType::F16 => MatrixData::F16(bytemuck::pod_collect_to_vec(&bytes)),
            TensorType::BF16 => MatrixData::BF16(bytemuck::pod_collect_to_vec(&bytes)),
            // Quantized matrices are only ever read in place (`weight`).
            _ => return Err(unsupported(info)),
        };
        Ok(Matrix { rows, cols, data })
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let info = self.checked(name, &[len])?;
        let values = float_values(&self.file, info)?;
        Ok(match self.row_heads(name) {
            Some(heads) => (0..len)
                .map(|r| values[interleaved_row(r, len, heads)])
                .collect(),
            None => values,
        })
    }

    fn contains(&self, name: &str) -> bool {
        gguf_name(name).is_some_and(|g| self.file.tensor(&g).is_some())
    }

    fn weight(&self, name: &str, rows: usize, cols: usize) -> Result<WeightMatrix> {
        let info = self.checked(name, &[rows, cols])?;
        if !info.tensor_type.is_quantized() {
            return Ok(WeightMatrix::Packed(PackedMatrix::pack(
                &self.matrix(name, rows, cols)?,
            )));
        }
        let bytes = match self.row_heads(name) {
            Some(heads) => QuantBytes::Owned(Arc::new(deinterleave(
                self.file.tensor_bytes(info).expect("known type"),
                rows,
                heads,
            ))),
            None => {
                let len = info.size.expect("known type");
                let copied = self
                    .copies
                    .as_ref()
                    .and_then(|c| Some((c, *c.starts.get(&info.name)?)));
                match copied {
                    Some((copies, offset)) => QuantBytes::Copied {
                        copy: copies.bytes.clone(),
                        offset,
                        len,
                    },
                    None => QuantBytes::Mapped {
                        map: self.file.map_of(info).clone(),
                        offset: info.offset,
                        len,
                    },
                }
            }
        };
        let part = QuantPart::new(info.tensor_type, rows, cols, bytes).map_err(|reason| {
            ModelError::BadGgufTensor {
                name: info.name.clone(),
                reason,
            }
        })?;
        let widened = if self.widen_to_q8_0 {
            part.widened_to_q8_0()
        } else {
            None
        };
        let part = match widened {
            Some(wide) => {
                self.widened_bytes
                    .fetch_add(wide.size_in_bytes(), Ordering::Relaxed);
                wide
            }
            None => part,
        };
        Ok(WeightMatrix::Quant(QuantMatrix::new(
            part.with_int_dot(self.int_dot),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_is_undone_per_head() {
        // Two heads of 4: GGUF rows [a0 b0 a1 b1] per head hold HF rows [a0 a1 b0 b1].
        let hf: Vec<usize> = (0..8).map(|r| interleaved_row(r, 8, 2)).collect();
        assert_eq!(hf, [0, 2, 1, 3, 4, 6, 5, 7]);
    }

    #[test]
    fn copies_hold_each_kept_matrix_byte_for_byte_from_a_64_byte_boundary() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/gguf/tiny-qwen2-kquants.gguf");
        let file = GgufFile::open(&path).unwrap();
        let copies = Copies::of(&file, |t| !t.name.ends_with("ffn_down.weight")).unwrap();
        let quantized: Vec<&TensorInfo> = file
            .tensors()
            .filter(|t| t.tensor_type.is_quantized() && t.dims.len() == 2)
            .collect();
        assert!(quantized.len() > copies.starts.len(), "ffn_down left out");
        for t in quantized {
            let start = copies.starts.get(&t.name);
            if t.name.ends_with("ffn_down.weight") {
                assert!(start.is_none(), "{} was left out", t.name);
                continue;
            }
            let start = *start.unwrap();
            let want = file.tensor_bytes(t).unwrap();
            assert_eq!(start % 64, 0, "{}", t.name);
            assert_eq!(&copies.bytes[start..][..want.len()], want, "{}", t.name);
        }
        // Nothing quantized kept: no copy at all.
        assert!(Copies::of(&file, |_| false).is_none());
    }
}
