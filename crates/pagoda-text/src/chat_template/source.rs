//! Finding a model directory's chat template and special tokens.
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::error::{Result, TextError};

pub struct FoundTemplate {
    pub source: String,
    pub bos_token: Option<String>,
    pub eos_token: Option<String>,
    /// The file the template came from, for error messages.
    pub origin: PathBuf,
}

pub fn find_in_model_dir(dir: &Path) -> Result<Option<FoundTemplate>> {
    let config_path = dir.join("tokenizer_config.json");
    let config = if config_path.exists() {
        let text = read(&config_path)?;
        serde_json::from_str::<Json>(&text).map_err(|e| TextError::Config {
            path: config_path.clone(),
            reason: e.to_string(),
        })?
    } else {
        Json::Null
    };
    let bos_token = special_token(&config, "bos_token");
    let eos_token = special_token(&config, "eos_token");

    // Newer checkpoints keep the template in its own file, which then takes precedence.
    let jinja_path = dir.join("chat_template.jinja");
    let (source, origin) = if jinja_path.exists() {
        (read(&jinja_path)?, jinja_path)
    } else {
        match config.get("chat_template") {
            None | Some(Json::Null) => return Ok(None),
            Some(field) => (template_from_config(field, &config_path)?, config_path),
        }
    };
    Ok(Some(FoundTemplate {
        source,
        bos_token,
        eos_token,
        origin,
    }))
}

/// `chat_template` is either the template itself or a list of named templates.
fn template_from_config(field: &Json, config_path: &Path) -> Result<String> {
    let invalid = |reason: String| TextError::Config {
        path: config_path.to_path_buf(),
        reason,
    };
    match field {
        Json::String(source) => Ok(source.clone()),
        Json::Array(named) => {
            let mut names = Vec::new();
            for entry in named {
                let name = entry.get("name").and_then(Json::as_str);
                let template = entry.get("template").and_then(Json::as_str);
                match (name, template) {
                    (Some("default"), Some(template)) => return Ok(template.to_string()),
                    (Some(name), Some(_)) => names.push(name.to_string()),
                    _ => {
                        return Err(invalid(
                            "chat_template entries need a \"name\" and a \"template\"".into(),
                        ))
                    }
                }
            }
            Err(invalid(format!(
                "chat_template has no \"default\" entry (named templates: {})",
                names.join(", ")
            )))
        }
        _ => Err(invalid(
            "chat_template is neither a string nor a list of named templates".into(),
        )),
    }
}

/// A special token given as a string or as an `AddedToken` object `{"content": ...}`.
fn special_token(config: &Json, key: &str) -> Option<String> {
    match config.get(key)? {
        Json::String(token) => Some(token.clone()),
        Json::Object(token) => token
            .get("content")
            .and_then(Json::as_str)
            .map(str::to_string),
        _ => None,
    }
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| TextError::Config {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}
