//! The one request pipeline both generating endpoints share:
//!
//! parse -> validate once into a typed `ValidRequest` -> cheap gateway checks -> guard,
//! render and tokenize (on the blocking pool) -> resolve `max_tokens` against the context ->
//! admit (reserve with the gateway) -> submit -> `Submitted`, whose streams meter, guard and
//! count every output. The handlers only turn `Submitted` into their wire format.
//!
//! Work is ordered cheapest first: authentication ran in the middleware, and a tenant out of
//! rate or budget is refused before any CPU is spent on its prompt.

pub mod prepare;
pub mod validate;

use std::sync::Arc;

use axum::body::Bytes;
use pagoda_runtime::GenerateRequest;
use pagoda_text::Tokenizer;

use crate::error::ApiError;
use crate::gateway::{self, Caller};
use crate::generate::{self, Tracked};
use crate::guard::Guarded;
use crate::ids::{new_id, unix_now};
use crate::state::AppState;
use crate::structured;
use crate::wire::request::parse_json;

pub use validate::Endpoint;

/// What every response of one request shares.
#[derive(Clone)]
pub struct ResponseMeta {
    pub id: String,
    pub created: u64,
    pub model: String,
}

/// A request running in the engine, with what its response needs.
pub struct Submitted {
    pub meta: ResponseMeta,
    pub streams: Vec<Tracked>,
    pub guarded: Option<Arc<Guarded>>,
    /// Choices per prompt.
    pub n: usize,
    /// Per prompt, the text to put before each choice (`echo`), else empty.
    pub echoes: Vec<String>,
    /// Alternatives per token when logprobs were asked for.
    pub logprobs: Option<usize>,
    pub stream: bool,
    pub include_usage: bool,
    pub tokenizer: Arc<Tokenizer>,
}

impl Submitted {
    /// Choices over all prompts.
    pub fn num_choices(&self) -> usize {
        self.echoes.len() * self.n
    }
}

/// Runs a generating request from its body to the engine.
pub async fn run(
    state: &AppState,
    caller: Option<Caller>,
    body: Bytes,
    endpoint: Endpoint,
) -> Result<Submitted, ApiError> {
    let loaded = state.ready()?;
    let meta = ResponseMeta {
        id: new_id(endpoint.id_prefix()),
        created: unix_now(),
        model: state.model_name().to_string(),
    };
    let work_state = state.clone();
    let work_caller = caller.clone();
    let response_id = meta.id.clone();
    let (request, prepared, constraint) = state
        .run_blocking(move || {
            let state = work_state;
            let loaded = state.ready()?;
            let json = parse_json(&body)?;
            let validate::ValidRequest { input, params } =
                validate::validate(&json, endpoint, state.limits(), loaded.engine.info().into())?;
            let requested = structured::requested(&json)?;
            drop(json);
            state.check_model(params.model.as_deref())?;
            gateway::precheck(&state, work_caller.as_ref(), params.sequences())?;
            let constraint = requested
                .map(|r| structured::compile(&loaded.engine, &r))
                .transpose()?;
            let prepared = prepare::prepare(
                loaded,
                state.guard(),
                work_caller.as_ref(),
                &response_id,
                input,
                params.echo,
            )?;
            if params.logprobs.is_some()
                && prepared
                    .guarded
                    .as_ref()
                    .is_some_and(|g| g.filters_output())
            {
                // Token strings are the raw output: they would spell out what the output
                // filters redact or cut.
                return Err(ApiError::invalid(
                    "logprobs",
                    "logprobs are not available while output guardrails apply to this request",
                ));
            }
            Ok((params, prepared, constraint))
        })
        .await?;
    tracing::debug!(
        id = %meta.id,
        prompts = prepared.prompts.len(),
        n = request.n,
        stream = request.stream,
        "request prepared"
    );

    let max_model_len = loaded.engine.info().max_model_len;
    let mut requests = Vec::with_capacity(prepared.prompts.len());
    let mut echoes = Vec::with_capacity(prepared.prompts.len());
    for p in prepared.prompts {
        let mut sampling = request.sampling.clone();
        let max_tokens = request
            .max_tokens
            .resolve(p.token_ids.len(), max_model_len)?;
        sampling.max_tokens = Some(max_tokens);
        sampling.min_tokens = sampling.min_tokens.min(max_tokens);
        echoes.push(if request.echo {
            p.text.unwrap_or_default()
        } else {
            String::new()
        });
        requests.push(GenerateRequest {
            prompt_token_ids: p.token_ids,
            sampling,
            priority: request.priority,
            cache_salt: None,
            tenant: None,
            skip_special_tokens: request.skip_special_tokens,
            constraint: constraint.clone(),
        });
    }
    let ticket = gateway::admit(
        state,
        caller.as_ref(),
        &meta.id,
        &mut requests,
        request.cache_salt.as_deref(),
    )
    .await?;
    let streams = generate::submit(state, loaded, requests, ticket)?;
    Ok(Submitted {
        meta,
        streams,
        guarded: prepared.guarded,
        n: request.n,
        echoes,
        logprobs: request.logprobs,
        stream: request.stream,
        include_usage: request.include_usage,
        tokenizer: loaded.engine.tokenizer().clone(),
    })
}
