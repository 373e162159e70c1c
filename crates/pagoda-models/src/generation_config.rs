//! `generation_config.json`: the checkpoint's own stopping and sampling defaults.

use std::path::Path;

use serde::Deserialize;

use crate::config::TokenIds;
use crate::error::{ModelError, Result};

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct GenerationConfig {
    pub bos_token_id: Option<TokenIds>,
    pub eos_token_id: Option<TokenIds>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<i64>,
    pub repetition_penalty: Option<f32>,
    pub do_sample: Option<bool>,
    pub max_new_tokens: Option<usize>,
}

impl GenerationConfig {
    /// Reads the file if the checkpoint has one; its absence is normal.
    pub fn load_optional(dir: &Path) -> Result<Self> {
        let path = dir.join("generation_config.json");
        if !path.exists() {
            return Ok(GenerationConfig::default());
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::io(&path, e))?;
        serde_json::from_str(&text).map_err(|source| ModelError::ConfigJson { path, source })
    }

    pub fn eos_token_ids(&self) -> Vec<u32> {
        self.eos_token_id
            .as_ref()
            .map(TokenIds::to_vec)
            .unwrap_or_default()
    }
}
