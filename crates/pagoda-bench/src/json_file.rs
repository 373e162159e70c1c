//! Reading a JSON report back (`bench compare`, `plan`, the console), with the path in the
//! error.

use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::BenchError;

pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|source| BenchError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| BenchError::ParseJson {
        path: path.to_owned(),
        source,
    })
}
