//! `GET /v1/models` and `GET /v1/models/{model}`.

use axum::extract::{Path, State};
use axum::Json;

use crate::error::ApiError;
use crate::state::AppState;
use crate::wire::response::{ModelCard, ModelList};

pub async fn list(State(state): State<AppState>) -> Result<Json<ModelList>, ApiError> {
    let data = state
        .served_model_names()
        .iter()
        .map(|name| card(&state, name))
        .collect::<Result<_, _>>()?;
    Ok(Json(ModelList {
        object: "list",
        data,
    }))
}

/// Names may contain slashes (`Qwen/Qwen2.5-0.5B`), so the route captures the rest.
pub async fn retrieve(
    State(state): State<AppState>,
    Path(model): Path<String>,
) -> Result<Json<ModelCard>, ApiError> {
    state.check_model(Some(&model))?;
    Ok(Json(card(&state, &model)?))
}

fn card(state: &AppState, name: &str) -> Result<ModelCard, ApiError> {
    let loaded = state
        .loaded()
        .ok_or(ApiError::Unavailable("the model is still loading"))?;
    let info = loaded.engine.info();
    Ok(ModelCard {
        id: name.to_string(),
        object: "model",
        created: state.created(),
        owned_by: "pagoda",
        root: info.model_dir.display().to_string(),
        parent: None,
        max_model_len: info.max_model_len,
    })
}
