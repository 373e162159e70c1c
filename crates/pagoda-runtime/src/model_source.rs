//! Where a model comes from: a local directory, a GGUF file (or a directory holding one), or
//! a Hugging Face hub id downloaded into the standard Hugging Face cache (`HF_HOME`,
//! `HF_HUB_CACHE`), with a progress bar; `repo:QUANT` picks one GGUF file of a hub repo. A
//! split GGUF (`NAME-00001-of-00003.gguf` and its siblings) counts as one file, named by its
//! first shard.

use std::path::{Path, PathBuf};

use crate::error::{Result, RuntimeError};

/// Files a checkpoint may carry besides its weights; missing optional ones are fine.
const REQUIRED_FILES: [&str; 2] = ["config.json", "tokenizer.json"];
const OPTIONAL_FILES: [&str; 3] = [
    "tokenizer_config.json",
    "generation_config.json",
    "chat_template.jinja",
];

/// Returns a local directory holding the model. `with_weights` is false for dummy weights,
/// which need only the config and tokenizer.
pub fn resolve_model(spec: &str, with_weights: bool) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.is_file() {
        if is_gguf(path) {
            return Ok(path.to_path_buf());
        }
        return Err(RuntimeError::ModelNotFound(format!(
            "{spec} is a file but not a GGUF file; give a GGUF file or a model directory"
        )));
    }
    if path.is_dir() {
        return local_dir(path);
    }
    let (repo, quant) = match spec.split_once(':') {
        Some((repo, quant)) => (repo, Some(quant)),
        None => (spec, None),
    };
    if !looks_like_hub_id(repo) || quant.is_some_and(str::is_empty) {
        return Err(RuntimeError::ModelNotFound(format!(
            "{spec} is not a directory or GGUF file, nor a Hugging Face hub id like `Qwen/Qwen2.5-0.5B-Instruct` (or `repo:Q4_K_M` for one GGUF file of a repo)"
        )));
    }
    match quant {
        Some(quant) => download_gguf(repo, Some(quant)),
        None => download(repo, with_weights),
    }
}

/// A checkpoint directory as it is; a directory without `config.json` holding one GGUF file
/// (or one split set) is that file.
fn local_dir(dir: &Path) -> Result<PathBuf> {
    if dir.join("config.json").exists() {
        return Ok(dir.to_path_buf());
    }
    let mut ggufs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| RuntimeError::ModelNotFound(format!("{}: {e}", dir.display())))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gguf") && is_gguf(p))
        .collect();
    ggufs.sort();
    let names = file_names(&ggufs);
    if one_split_set(&names) {
        return Ok(ggufs.remove(0));
    }
    match ggufs.len() {
        0 => Ok(dir.to_path_buf()),
        1 => Ok(ggufs.remove(0)),
        _ => Err(RuntimeError::ModelNotFound(format!(
            "{} holds several GGUF files ({}); name one",
            dir.display(),
            file_names(&ggufs).join(", ")
        ))),
    }
}

/// Whether `names` (sorted) are exactly the shards of one split GGUF, first first.
fn one_split_set(names: &[String]) -> bool {
    let base = |name: &str| name.rsplit('/').next().unwrap_or(name).to_string();
    let shards: Option<Vec<(String, usize, usize)>> = names
        .iter()
        .map(|n| {
            let name = base(n);
            pagoda_gguf::parse_shard_name(&name).map(|(prefix, no, count)| {
                (n[..n.len() - name.len()].to_string() + prefix, no, count)
            })
        })
        .collect();
    shards.is_some_and(|shards| {
        !shards.is_empty()
            && shards.iter().enumerate().all(|(i, (prefix, no, count))| {
                (prefix, *no, *count) == (&shards[0].0, i, shards.len())
            })
    })
}

fn file_names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect()
}

fn is_gguf(path: &Path) -> bool {
    pagoda_models::loader::is_gguf(path)
}

fn looks_like_hub_id(spec: &str) -> bool {
    let parts: Vec<&str> = spec.split('/').collect();
    parts.len() == 2
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
}

/// A hub error as the one-line "model not found" the user sees.
fn hub_error(repo_id: &str, e: hf_hub::api::sync::ApiError) -> RuntimeError {
    RuntimeError::ModelNotFound(format!("{repo_id}: {e}"))
}

/// The hub repo `repo_id`, downloads shown with a progress bar.
fn hub_repo(repo_id: &str) -> Result<hf_hub::api::sync::ApiRepo> {
    let api = hf_hub::api::sync::ApiBuilder::new()
        .with_progress(true)
        .build()
        .map_err(|e| hub_error(repo_id, e))?;
    Ok(api.model(repo_id.to_string()))
}

fn download(repo_id: &str, with_weights: bool) -> Result<PathBuf> {
    let hub_error = |e| hub_error(repo_id, e);
    let repo = hub_repo(repo_id)?;
    let mut dir = None;
    for file in REQUIRED_FILES {
        let local = match repo.get(file) {
            Ok(local) => local,
            // Repos of GGUF files carry no config.json.
            Err(e) if file == "config.json" && with_weights => {
                return download_gguf(repo_id, None).map_err(|gguf_error| {
                    RuntimeError::ModelNotFound(format!("{repo_id}: {e}; {gguf_error}"))
                })
            }
            Err(e) => return Err(hub_error(e)),
        };
        dir = local.parent().map(Path::to_path_buf);
    }
    for file in OPTIONAL_FILES {
        let _ = repo.get(file);
    }
    if with_weights {
        match repo.get("model.safetensors.index.json") {
            Ok(index) => {
                let text = std::fs::read_to_string(&index).map_err(|e| {
                    RuntimeError::ModelNotFound(format!("{}: {e}", index.display()))
                })?;
                for shard in shard_names(&text) {
                    repo.get(&shard).map_err(hub_error)?;
                }
            }
            Err(_) => {
                repo.get("model.safetensors").map_err(hub_error)?;
            }
        }
    }
    dir.ok_or_else(|| RuntimeError::ModelNotFound(repo_id.to_string()))
}

/// Downloads the one GGUF file (or split set) of `repo_id` that `quant` names (or its only
/// one); the path of the file or first shard.
fn download_gguf(repo_id: &str, quant: Option<&str>) -> Result<PathBuf> {
    let hub_error = |e| hub_error(repo_id, e);
    let repo = hub_repo(repo_id)?;
    let info = repo.info().map_err(hub_error)?;
    let names: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
    let files = pick_gguf(&names, quant)
        .map_err(|e| RuntimeError::ModelNotFound(format!("{repo_id}: {e}")))?;
    // The cache keeps a repo's files under their names in one snapshot, so the shards stay
    // siblings.
    let mut local = files.iter().map(|f| repo.get(f).map_err(hub_error));
    let first = local.next().expect("at least one file")?;
    local.collect::<Result<Vec<_>>>()?;
    Ok(first)
}

/// The GGUF file among `names` whose name holds `quant` (case-insensitively, as a whole
/// dot/dash-separated part, so `Q4_K` does not pick `Q4_K_M`), or the only one; all the
/// shards of a split one, first first.
fn pick_gguf(names: &[String], quant: Option<&str>) -> std::result::Result<Vec<String>, String> {
    let ggufs: Vec<&String> = names
        .iter()
        .filter(|n| n.to_ascii_lowercase().ends_with(".gguf") && !n.contains("mmproj"))
        .collect();
    if ggufs.is_empty() {
        return Err("the repo holds no GGUF file".into());
    }
    let mut matching: Vec<&String> = match quant {
        None => ggufs.clone(),
        Some(quant) => {
            let quant = quant.to_ascii_lowercase();
            ggufs
                .iter()
                .copied()
                .filter(|n| {
                    let stem = n.to_ascii_lowercase();
                    let stem = stem
                        .trim_end_matches(".gguf")
                        .rsplit('/')
                        .next()
                        .unwrap_or("")
                        .to_string();
                    stem.split(['.', '-']).any(|part| part == quant)
                })
                .collect()
        }
    };
    let list = || {
        ggufs
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    matching.sort();
    let matching: Vec<String> = matching.into_iter().cloned().collect();
    if one_split_set(&matching) {
        return Ok(matching);
    }
    match matching.as_slice() {
        [one] => Ok(vec![one.clone()]),
        [] => Err(format!(
            "no GGUF file matches {:?}; the repo has {}",
            quant.unwrap_or(""),
            list()
        )),
        _ => Err(format!(
            "several GGUF files match; pick one with `repo:QUANT` ({})",
            list()
        )),
    }
}

/// Distinct shard file names listed in a safetensors index's `weight_map`.
fn shard_names(index_json: &str) -> Vec<String> {
    let parsed: serde_json::Value = serde_json::from_str(index_json).unwrap_or_default();
    let mut names: Vec<String> = parsed["weight_map"]
        .as_object()
        .map(|map| {
            map.values()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids_are_told_apart_from_paths() {
        assert!(looks_like_hub_id("Qwen/Qwen2.5-0.5B-Instruct"));
        assert!(!looks_like_hub_id("./models/x"));
        assert!(!looks_like_hub_id("/abs/path"));
        assert!(!looks_like_hub_id("no-slash"));
        assert!(!looks_like_hub_id("a/b/c"));
    }

    #[test]
    fn missing_directory_that_is_no_hub_id_is_a_clear_error() {
        let err = resolve_model("/definitely/not/here", true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("/definitely/not/here"), "{err}");
    }

    #[test]
    fn a_quant_picks_its_gguf_file() {
        let names: Vec<String> = [
            "README.md",
            "qwen2.5-0.5b-instruct-q4_k_m.gguf",
            "qwen2.5-0.5b-instruct-q4_k.gguf",
            "Qwen2.5-0.5B-Instruct-Q8_0.gguf",
            "mmproj-q8_0.gguf",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            pick_gguf(&names, Some("Q4_K_M")).unwrap(),
            ["qwen2.5-0.5b-instruct-q4_k_m.gguf"]
        );
        assert_eq!(
            pick_gguf(&names, Some("q4_k")).unwrap(),
            ["qwen2.5-0.5b-instruct-q4_k.gguf"]
        );
        assert_eq!(
            pick_gguf(&names, Some("q8_0")).unwrap(),
            ["Qwen2.5-0.5B-Instruct-Q8_0.gguf"]
        );
        let none = pick_gguf(&names, Some("Q2_K")).unwrap_err();
        assert!(none.contains("Q2_K") && none.contains("q4_k_m"), "{none}");
        assert!(pick_gguf(&names, None).unwrap_err().contains("several"));
        assert!(pick_gguf(&names[..1], None)
            .unwrap_err()
            .contains("no GGUF"));
    }

    #[test]
    fn a_split_gguf_is_picked_whole() {
        let names: Vec<String> = [
            "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf",
            "Q4_K_M/m-Q4_K_M-00001-of-00002.gguf",
            "m-Q8_0.gguf",
            "Q6_K/m-Q6_K-00001-of-00003.gguf",
            "Q6_K/m-Q6_K-00003-of-00003.gguf",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            pick_gguf(&names, Some("q4_k_m")).unwrap(),
            [
                "Q4_K_M/m-Q4_K_M-00001-of-00002.gguf",
                "Q4_K_M/m-Q4_K_M-00002-of-00002.gguf"
            ]
        );
        assert_eq!(pick_gguf(&names, Some("Q8_0")).unwrap(), ["m-Q8_0.gguf"]);
        // A set missing a shard is no set: several files match.
        assert!(pick_gguf(&names, Some("q6_k"))
            .unwrap_err()
            .contains("several"));
        assert!(pick_gguf(&names[..2], None).is_ok());
        assert!(!one_split_set(&names[..2]), "unsorted");
        assert!(!one_split_set(&[
            "a-00001-of-00002.gguf".into(),
            "b-00002-of-00002.gguf".into()
        ]));
    }

    #[test]
    fn a_directory_holding_one_gguf_file_is_that_file() {
        let dir = std::env::temp_dir().join(format!("pagoda-gguf-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/gguf/tiny-qwen2-f16.gguf");
        std::fs::copy(&fixture, dir.join("a.gguf")).unwrap();
        assert_eq!(
            resolve_model(dir.to_str().unwrap(), true).unwrap(),
            dir.join("a.gguf")
        );
        std::fs::copy(&fixture, dir.join("b.gguf")).unwrap();
        let err = resolve_model(dir.to_str().unwrap(), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a.gguf") && err.contains("b.gguf"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        // The shards of one split GGUF are one file, named by its first shard.
        std::fs::create_dir_all(&dir).unwrap();
        for no in [1, 0] {
            let name = pagoda_gguf::shard_file_name("m", no, 2);
            std::fs::copy(&fixture, dir.join(name)).unwrap();
        }
        assert_eq!(
            resolve_model(dir.to_str().unwrap(), true).unwrap(),
            dir.join("m-00001-of-00002.gguf")
        );
        std::fs::remove_dir_all(&dir).unwrap();
        let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let err = resolve_model(readme.to_str().unwrap(), true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a GGUF file"), "{err}");
    }

    #[test]
    fn shard_names_come_from_the_weight_map() {
        let index = r#"{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}"#;
        assert_eq!(
            shard_names(index),
            [
                "model-00001-of-00002.safetensors",
                "model-00002-of-00002.safetensors"
            ]
        );
    }
}
