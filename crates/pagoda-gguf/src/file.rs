//! An opened GGUF file (or split set of files): metadata by key, tensors by name, bytes from
//! the memory maps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::error::{GgufError, Result};
use crate::reader::Reader;
use crate::split::{shard_paths, SPLIT_COUNT, SPLIT_NO, SPLIT_TENSORS_COUNT};
use crate::tensor_type::TensorType;
use crate::value::MetaValue;

const MAGIC: &[u8; 4] = b"GGUF";
pub(crate) const DEFAULT_ALIGNMENT: u64 = 32;
/// More dimensions than any ggml tensor has.
const MAX_DIMS: u32 = 4;

#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the innermost (contiguous) one, a matrix's columns.
    pub dims: Vec<u64>,
    pub tensor_type: TensorType,
    /// Which file of a split set holds it (0 for an unsplit file).
    pub shard: usize,
    /// Byte offset from the start of that file.
    pub offset: usize,
    /// Bytes the tensor occupies; `None` when its type is unknown.
    pub size: Option<usize>,
}

impl TensorInfo {
    /// Dimensions outermost first, as Hugging Face (and Pagoda) write shapes.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    pub fn num_values(&self) -> u64 {
        self.dims.iter().product()
    }
}

pub struct GgufFile {
    /// The file, or the first file of a split set.
    pub path: PathBuf,
    pub version: u32,
    /// The (first) file's metadata.
    pub metadata: BTreeMap<String, MetaValue>,
    tensors: BTreeMap<String, TensorInfo>,
    /// One per file, in shard order.
    maps: Vec<Arc<Mmap>>,
    shard_paths: Vec<PathBuf>,
}

/// One file as read: its header, metadata and tensor directory.
struct Shard {
    version: u32,
    metadata: BTreeMap<String, MetaValue>,
    tensors: Vec<TensorInfo>,
    map: Arc<Mmap>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("tensors", &self.tensors.len())
            .field("shards", &self.shard_paths.len())
            .finish()
    }
}

/// Whether `path` names a GGUF file (by its first four bytes, not its name).
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == MAGIC
}

impl GgufFile {
    pub fn is_gguf(path: &Path) -> bool {
        is_gguf(path)
    }

    /// Opens a GGUF file; a shard of a split set opens the whole set (its siblings by name).
    pub fn open(path: &Path) -> Result<GgufFile> {
        let given = read_shard(path, 0)?;
        let count = split_key(&given, path, SPLIT_COUNT)?.unwrap_or(1);
        let no = split_key(&given, path, SPLIT_NO)?.unwrap_or(0);
        if count <= 1 && no == 0 {
            return GgufFile::from_shards(vec![path.to_path_buf()], vec![given]);
        }
        if no >= count {
            return Err(malformed(
                path,
                format!("{SPLIT_NO} is {no} of {SPLIT_COUNT} {count}"),
            ));
        }
        let paths = shard_paths(path, no, count).map_err(|reason| malformed(path, reason))?;
        let mut given = Some(given);
        let mut shards = Vec::with_capacity(count);
        for (i, shard_path) in paths.iter().enumerate() {
            let shard = if i == no {
                let mut shard = given.take().expect("read once");
                shard.tensors.iter_mut().for_each(|t| t.shard = no);
                shard
            } else if !shard_path.is_file() {
                return Err(GgufError::MissingShard {
                    path: path.to_path_buf(),
                    missing: shard_path.clone(),
                    count,
                });
            } else {
                read_shard(shard_path, i)?
            };
            let says = (
                split_key(&shard, shard_path, SPLIT_NO)?,
                split_key(&shard, shard_path, SPLIT_COUNT)?,
            );
            if says != (Some(i), Some(count)) {
                return Err(malformed(
                    shard_path,
                    format!(
                        "as shard {} of {count} it needs {SPLIT_NO} {i} and {SPLIT_COUNT} {count}, not {says:?}",
                        i + 1
                    ),
                ));
            }
            shards.push(shard);
        }
        let file = GgufFile::from_shards(paths, shards)?;
        if let Some(want) = file.get(SPLIT_TENSORS_COUNT) {
            let total = file.tensors.len();
            if want.as_u64() != Some(total as u64) {
                return Err(malformed(
                    &file.path,
                    format!(
                        "{SPLIT_TENSORS_COUNT} is {want:?} but its shards hold {total} tensors"
                    ),
                ));
            }
        }
        Ok(file)
    }

    /// One file of the shards' tensors, under the first shard's name, version and metadata.
    fn from_shards(paths: Vec<PathBuf>, shards: Vec<Shard>) -> Result<GgufFile> {
        let mut shards = shards.into_iter();
        let first = shards.next().expect("at least one shard");
        let mut tensors = BTreeMap::new();
        let mut maps = vec![first.map];
        let mut add = |infos: Vec<TensorInfo>| {
            for info in infos {
                if let Some(earlier) = tensors.insert(info.name.clone(), info) {
                    return Err(malformed(
                        &paths[earlier.shard],
                        format!("tensor `{}` appears twice", earlier.name),
                    ));
                }
            }
            Ok(())
        };
        add(first.tensors)?;
        for shard in shards {
            maps.push(shard.map);
            add(shard.tensors)?;
        }
        Ok(GgufFile {
            path: paths[0].clone(),
            version: first.version,
            metadata: first.metadata,
            tensors,
            maps,
            shard_paths: paths,
        })
    }

    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(MetaValue::as_str)
    }

    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(MetaValue::as_u64)
    }

    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(MetaValue::as_f64)
    }

    pub fn get_array(&self, key: &str) -> Option<&[MetaValue]> {
        self.get(key).and_then(MetaValue::as_array)
    }

    /// A string array (token lists, merges); `Err` when present with the wrong type.
    pub fn get_strings(&self, key: &str) -> Result<Option<Vec<&str>>> {
        let Some(items) = self.get(key) else {
            return Ok(None);
        };
        let wrong = || GgufError::Metadata {
            key: key.to_string(),
            problem: "is not an array of strings".into(),
        };
        let items = items.as_array().ok_or_else(wrong)?;
        items
            .iter()
            .map(|v| v.as_str().ok_or_else(wrong))
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// `general.architecture`, the prefix of the model's own keys.
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(name)
    }

    pub fn tensors(&self) -> impl Iterator<Item = &TensorInfo> {
        self.tensors.values()
    }

    /// The tensor's bytes in its file's map (`None` for types of unknown size).
    pub fn tensor_bytes(&self, info: &TensorInfo) -> Option<&[u8]> {
        info.size
            .map(|size| &self.maps[info.shard][info.offset..info.offset + size])
    }

    /// The shared map of the file holding `info`, for weights that keep pointing into it.
    pub fn map_of(&self, info: &TensorInfo) -> &Arc<Mmap> {
        &self.maps[info.shard]
    }

    /// The files read: one, or every shard of a split set in order.
    pub fn shard_paths(&self) -> &[PathBuf] {
        &self.shard_paths
    }
}

fn malformed(path: &Path, reason: String) -> GgufError {
    GgufError::Malformed {
        path: path.to_path_buf(),
        reason,
    }
}

fn read_shard(path: &Path, shard: usize) -> Result<Shard> {
    let io = |source| GgufError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the map is read-only; a file changed underneath a running server is as
    // unsupported as for every other memory-mapping model loader.
    let map = unsafe { Mmap::map(&file) }.map_err(io)?;
    parse(path, shard, Arc::new(map))
}

fn parse(path: &Path, shard: usize, map: Arc<Mmap>) -> Result<Shard> {
    let malformed = |reason: String| GgufError::Malformed {
        path: path.to_path_buf(),
        reason,
    };
    if map.len() < 4 || &map[..4] != MAGIC {
        return Err(GgufError::NotGguf {
            path: path.to_path_buf(),
        });
    }
    let mut r = Reader::new(&map[4..]);
    let version = r.u32().map_err(malformed)?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::UnsupportedVersion {
            path: path.to_path_buf(),
            version,
        });
    }
    // A tensor entry takes at least 24 bytes, a metadata entry at least 13.
    let tensor_count = r.count(24, "tensor").map_err(malformed)?;
    let kv_count = r.count(13, "metadata").map_err(malformed)?;
    let mut metadata = BTreeMap::new();
    for _ in 0..kv_count {
        let key = r.string().map_err(malformed)?;
        let type_id = r.u32().map_err(malformed)?;
        let value = r
            .value(type_id, 0)
            .map_err(|e| malformed(format!("metadata `{key}`: {e}")))?;
        metadata.insert(key, value);
    }
    let mut infos = Vec::with_capacity(tensor_count);
    for _ in 0..tensor_count {
        let name = r.string().map_err(malformed)?;
        let n_dims = r.u32().map_err(malformed)?;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(malformed(format!(
                "tensor `{name}` has {n_dims} dimensions"
            )));
        }
        let dims = (0..n_dims)
            .map(|_| r.u64())
            .collect::<Result<Vec<u64>, String>>()
            .map_err(malformed)?;
        let tensor_type = TensorType::from_id(r.u32().map_err(malformed)?);
        let offset = r.u64().map_err(malformed)?;
        infos.push((name, dims, tensor_type, offset));
    }
    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => v
            .as_u64()
            .filter(|a| a.is_power_of_two())
            .ok_or_else(|| malformed("general.alignment is not a power of two".into()))?,
    };
    let header_end = (4 + r.position()) as u64;
    let data_start = header_end.div_ceil(alignment) * alignment;
    let tensors = infos
        .into_iter()
        .map(|(name, dims, tensor_type, offset)| {
            locate(&name, dims, tensor_type, offset, data_start, map.len())
                .map(|info| TensorInfo { shard, ..info })
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(malformed)?;
    Ok(Shard {
        version,
        metadata,
        tensors,
        map,
    })
}

/// A `split.*` key as a count; `Err` when present and not a non-negative integer.
fn split_key(shard: &Shard, path: &Path, key: &str) -> Result<Option<usize>> {
    match shard.metadata.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|v| usize::try_from(v).ok())
            .map(Some)
            .ok_or_else(|| malformed(path, format!("{key} is {v:?}, not a count"))),
    }
}

fn locate(
    name: &str,
    dims: Vec<u64>,
    tensor_type: TensorType,
    offset: u64,
    data_start: u64,
    file_len: usize,
) -> Result<TensorInfo, String> {
    let values = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("tensor `{name}` has an overflowing shape {dims:?}"))?;
    let size = match tensor_type.block() {
        None => None,
        Some((block_values, block_bytes)) => {
            if !dims[0].is_multiple_of(block_values as u64) {
                return Err(format!(
                    "tensor `{name}` of type {tensor_type} has rows of {} values, not a multiple of its block of {block_values}",
                    dims[0]
                ));
            }
            let bytes = (values / block_values as u64)
                .checked_mul(block_bytes as u64)
                .ok_or_else(|| format!("tensor `{name}` is too large"))?;
            Some(bytes)
        }
    };
    let start = data_start
        .checked_add(offset)
        .ok_or_else(|| format!("tensor `{name}` offset overflows"))?;
    let end = start.checked_add(size.unwrap_or(0));
    if end.is_none_or(|end| end > file_len as u64) {
        return Err(format!("tensor `{name}` runs past the end of the file"));
    }
    Ok(TensorInfo {
        shard: 0,
        name: name.to_string(),
        dims,
        tensor_type,
        offset: start as usize,
        size: size.map(|s| s as usize),
    })
}
