//! Memory-mapped `*.safetensors`, single or sharded through `model.safetensors.index.json`.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use memmap2::Mmap;
use safetensors::tensor::{Dtype, SafeTensors, TensorInfo};

use super::WeightSource;
use crate::error::{ModelError, Result};
use crate::matrix::{Matrix, MatrixData, WeightDtype};

struct MappedFile {
    path: PathBuf,
    map: Mmap,
    /// Bytes before the data section (8-byte length plus JSON header).
    data_start: usize,
    tensors: HashMap<String, TensorInfo>,
}

pub struct SafetensorsWeights {
    files: Vec<MappedFile>,
    /// Tensor name -> index into `files`.
    owner: HashMap<String, usize>,
    dtype: WeightDtype,
}

impl SafetensorsWeights {
    /// Opens the weights of a model directory. `dtype` is what matrices are held in; `None`
    /// keeps each tensor's stored dtype.
    pub fn open(dir: &Path, dtype: Option<WeightDtype>) -> Result<Self> {
        let index = dir.join("model.safetensors.index.json");
        let single = dir.join("model.safetensors");
        let paths = if index.exists() {
            shard_paths(dir, &index)?
        } else if single.exists() {
            vec![single]
        } else {
            let mut found: Vec<PathBuf> = list_dir(dir)?
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
                .collect();
            if found.is_empty() {
                return Err(no_weights_error(dir)?);
            }
            found.sort();
            found
        };
        let mut files = Vec::with_capacity(paths.len());
        let mut owner = HashMap::new();
        for path in paths {
            let file = map_file(&path)?;
            for name in file.tensors.keys() {
                owner.insert(name.clone(), files.len());
            }
            files.push(file);
        }
        let stored = files
            .iter()
            .flat_map(|f| f.tensors.values())
            .find_map(|t| stored_dtype(t.dtype));
        Ok(SafetensorsWeights {
            files,
            owner,
            dtype: dtype.or(stored).unwrap_or(WeightDtype::F32),
        })
    }

    /// The dtype matrices are held in.
    pub fn dtype(&self) -> WeightDtype {
        self.dtype
    }

    fn raw(&self, name: &str, expected: &[usize]) -> Result<(&[u8], Dtype)> {
        let file = &self.files[*self
            .owner
            .get(name)
            .ok_or_else(|| ModelError::MissingTensor {
                name: name.to_string(),
            })?];
        let info = &file.tensors[name];
        let numel: usize = info.shape.iter().product();
        let expected_numel: usize = expected.iter().product();
        // A [n] vector may be stored as [1, n] and the like: compare element counts and the
        // non-unit dimensions.
        let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
        if numel != expected_numel || squeeze(&info.shape) != squeeze(expected) {
            return Err(ModelError::WrongShape {
                name: name.to_string(),
                expected: expected.to_vec(),
                actual: info.shape.clone(),
            });
        }
        let (start, end) = info.data_offsets;
        let bytes = &file.map[file.data_start + start..file.data_start + end];
        Ok((bytes, info.dtype))
    }
}

impl WeightSource for SafetensorsWeights {
    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Matrix> {
        let (bytes, dtype) = self.raw(name, &[rows, cols])?;
        let data = convert(bytes, dtype, self.dtype, name)?;
        Ok(Matrix { rows, cols, data })
    }

    fn vector(&self, name: &str, len: usize) -> Result<Vec<f32>> {
        let (bytes, dtype) = self.raw(name, &[len])?;
        match convert(bytes, dtype, WeightDtype::F32, name)? {
            MatrixData::F32(v) => Ok(v),
            _ => unreachable!("asked for f32"),
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.owner.contains_key(name)
    }
}

fn stored_dtype(dtype: Dtype) -> Option<WeightDtype> {
    match dtype {
        Dtype::F32 => Some(WeightDtype::F32),
        Dtype::F16 => Some(WeightDtype::F16),
        Dtype::BF16 => Some(WeightDtype::BF16),
        _ => None,
    }
}

/// Copies stored bytes into an aligned buffer of the target dtype. `pod_collect_to_vec`
/// copes with tensors whose offset in the file is not aligned.
fn convert(bytes: &[u8], from: Dtype, to: WeightDtype, name: &str) -> Result<MatrixData> {
    let from = stored_dtype(from).ok_or_else(|| ModelError::UnsupportedDtype {
        name: name.to_string(),
        dtype: format!("{from:?}"),
    })?;
    let data = match (from, to) {
        (WeightDtype::F32, WeightDtype::F32) => {
            MatrixData::F32(bytemuck::pod_collect_to_vec(bytes))
        }
        (WeightDtype::F16, WeightDtype::F16) => {
            MatrixData::F16(bytemuck::pod_collect_to_vec(bytes))
        }
        (WeightDtype::BF16, WeightDtype::BF16) => {
            MatrixData::BF16(bytemuck::pod_collect_to_vec(bytes))
        }
        (from, to) => {
            let values = widen(bytes, from);
            match to {
                WeightDtype::F32 => MatrixData::F32(values),
                WeightDtype::F16 => {
                    MatrixData::F16(values.into_iter().map(f16::from_f32).collect())
                }
                WeightDtype::BF16 => {
                    MatrixData::BF16(values.into_iter().map(bf16::from_f32).collect())
                }
            }
        }
    };
    Ok(data)
}

fn widen(bytes: &[u8], from: WeightDtype) -> Vec<f32> {
    match from {
        WeightDtype::F32 => bytemuck::pod_collect_to_vec(bytes),
        WeightDtype::F16 => bytemuck::pod_collect_to_vec::<u8, f16>(bytes)
            .into_iter()
            .map(f16::to_f32)
            .collect(),
        WeightDtype::BF16 => bytemuck::pod_collect_to_vec::<u8, bf16>(bytes)
            .into_iter()
            .map(bf16::to_f32)
            .collect(),
    }
}

fn map_file(path: &Path) -> Result<MappedFile> {
    let file = File::open(path).map_err(|e| ModelError::io(path, e))?;
    // SAFETY: the file is opened read-only; like every mmap-based loader we assume it is not
    // truncated underneath us while loading.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| ModelError::io(path, e))?;
    let (header_len, metadata) =
        SafeTensors::read_metadata(&map).map_err(|e| ModelError::BadSafetensors {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    let tensors = metadata
        .tensors()
        .into_iter()
        .map(|(name, info)| (name, info.clone()))
        .collect();
    Ok(MappedFile {
        path: path.to_path_buf(),
        map,
        data_start: 8 + header_len,
        tensors,
    })
}

fn shard_paths(dir: &Path, index: &Path) -> Result<Vec<PathBuf>> {
    #[derive(serde::Deserialize)]
    struct Index {
        weight_map: HashMap<String, String>,
    }
    let text = std::fs::read_to_string(index).map_err(|e| ModelError::io(index, e))?;
    let parsed: Index = serde_json::from_str(&text).map_err(|e| ModelError::BadSafetensors {
        path: index.to_path_buf(),
        reason: format!("bad index: {e}"),
    })?;
    let mut files: Vec<String> = parsed.weight_map.into_values().collect();
    files.sort();
    files.dedup();
    for f in &files {
        if f.contains('/') || f.contains("..") {
            return Err(ModelError::BadSafetensors {
                path: index.to_path_buf(),
                reason: format!("shard name {f:?} leaves the model directory"),
            });
        }
    }
    Ok(files.into_iter().map(|f| dir.join(f)).collect())
}

fn list_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|e| ModelError::io(dir, e))?;
    Ok(entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
}

fn no_weights_error(dir: &Path) -> Result<ModelError> {
    let pickled = list_dir(dir)?.into_iter().find(|p| {
        p.extension()
            .is_some_and(|e| e == "bin" || e == "pt" || e == "pth" || e == "ckpt")
    });
    Ok(match pickled {
        Some(file) => ModelError::PickledWeights {
            dir: dir.to_path_buf(),
            file: file
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        },
        None => ModelError::NoWeights(dir.to_path_buf()),
    })
}

impl std::fmt::Debug for SafetensorsWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths: Vec<&PathBuf> = self.files.iter().map(|f| &f.path).collect();
        f.debug_struct("SafetensorsWeights")
            .field("files", &paths)
            .field("dtype", &self.dtype)
            .finish()
    }
}
