//! Where a model comes from: a local directory, or a Hugging Face hub id downloaded into the
//! standard Hugging Face cache (`HF_HOME`, `HF_HUB_CACHE`), with a progress bar.

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
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    if !looks_like_hub_id(spec) {
        return Err(RuntimeError::ModelNotFound(format!(
            "{spec} is not a directory, nor a Hugging Face hub id like `Qwen/Qwen2.5-0.5B-Instruct`"
        )));
    }
    download(spec, with_weights)
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

fn download(repo_id: &str, with_weights: bool) -> Result<PathBuf> {
    let hub_error =
        |e: hf_hub::api::sync::ApiError| RuntimeError::ModelNotFound(format!("{repo_id}: {e}"));
    let api = hf_hub::api::sync::ApiBuilder::new()
        .with_progress(true)
        .build()
        .map_err(hub_error)?;
    let repo = api.model(repo_id.to_string());
    let mut dir = None;
    for file in REQUIRED_FILES {
        let local = repo.get(file).map_err(hub_error)?;
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
