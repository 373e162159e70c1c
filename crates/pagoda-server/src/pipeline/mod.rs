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

use crate::chat_output::OutputPlan;
use crate::error::ApiError;
use crate::gateway::{self, Caller};
use crate::generate::{self, Tracked};
use crate::guard::Guarded;
use crate::ids::{new_id, unix_now};
use crate::state::AppState;
use crate::structured;
use crate::tools::{ToolRequest, ToolScope};
use crate::wire::request::parse_json;
use pagoda_text::reasoning::{prompt_closes_thinking, THINK_END};

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
    /// How each chat choice splits into reasoning, content and tool calls.
    pub output: OutputPlan,
    pub tool_audit: ToolAudit,
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
    let work_response_id = response_id.clone();
    let (request, prepared, constraint, output) = state
        .run_blocking(move || {
            let state = work_state;
            let loaded = state.ready()?;
            let json = parse_json(&body)?;
            let validate::ValidRequest { input, mut params } =
                validate::validate(&json, endpoint, state.limits(), loaded.engine.info().into())?;
            let requested = structured::requested(&json)?;
            let tools = match endpoint {
                Endpoint::Chat => ToolRequest::read(&json)?,
                Endpoint::Completions => None,
            };
            drop(json);
            state.check_model(params.model.as_deref())?;
            gateway::precheck(&state, work_caller.as_ref(), params.sequences())?;
            let scope = ToolScope::of(&state, work_caller.as_ref());
            if let Some(tools) = &tools {
                tools.check_scope(&scope)?;
            }
            let requested = constraint_source(requested, tools.as_ref(), &scope)?;
            let constraint = requested
                .map(|r| structured::compile(&loaded.engine, &r))
                .transpose()?;
            let mut prepared = prepare::prepare(
                loaded,
                state.guard(),
                work_caller.as_ref(),
                &work_response_id,
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
            let features = state.chat_features();
            let reasoning = features.reasoning.filter(|_| endpoint == Endpoint::Chat);
            let rendered = match endpoint {
                // The chat prompt's text is only for where its thinking starts.
                Endpoint::Chat => prepared.prompts.first_mut().and_then(|p| p.text.take()),
                Endpoint::Completions => None,
            }
            .unwrap_or_default();
            let template = loaded.chat_template.as_ref().map(|t| t.source());
            let format = features.tool_format(template);
            if tools.is_some() && format.is_some_and(|f| f.needs_special_tokens()) {
                // The call marker is a special token.
                params.skip_special_tokens = false;
            }
            let constraint = match (constraint, reasoning) {
                // The answer is constrained, not the thinking before it.
                (Some(c), Some(_)) if !prompt_closes_thinking(&rendered) => {
                    let end = loaded
                        .engine
                        .tokenizer()
                        .encode(THINK_END, false)
                        .map_err(|e| ApiError::Internal(e.to_string()))?;
                    Some(c.after(end))
                }
                (c, _) => c,
            };
            let output = OutputPlan::new(reasoning, &rendered, tools.as_ref(), format, &scope);
            Ok((params, prepared, constraint, output))
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
            itl_target_ms: None,
            cache_salt: None,
            tenant: None,
            skip_special_tokens: request.skip_special_tokens,
            constraint: constraint.clone(),
        });
    }
    let asked_slo = request.slo_class.as_deref();
    state.slo_classes().check_asked(asked_slo)?;
    let admission = gateway::admit(
        state,
        caller.as_ref(),
        &meta.id,
        &mut requests,
        request.cache_salt.as_deref(),
    )
    .await?;
    let slo = state
        .slo_classes()
        .resolve(asked_slo, admission.tenant_slo_class.as_deref());
    for r in &mut requests {
        r.itl_target_ms = slo.as_ref().and_then(|class| class.itl_ms);
    }
    let streams = generate::submit(state, loaded, requests, admission.ticket, slo)?;
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
        output,
        tool_audit: ToolAudit {
            guard: state.guard().cloned(),
            caller,
            request_id: response_id,
        },
    })
}

/// Where the output constraint comes from: `response_format` and friends, or a
/// `tool_choice` that forces a call. Both at once is a 400.
fn constraint_source(
    requested: Option<structured::Requested>,
    tools: Option<&ToolRequest>,
    scope: &ToolScope,
) -> Result<Option<structured::Requested>, ApiError> {
    let forced = tools.and_then(|t| t.constraint(scope));
    match (requested, forced) {
        (Some(r), Some(_)) => Err(ApiError::invalid(
            &r.param,
            format!(
                "`{}` and a forced `tool_choice` both constrain the output; give one",
                r.param
            ),
        )),
        (Some(r), None) => Ok(Some(r)),
        (None, Some(spec)) => Ok(Some(structured::Requested {
            spec,
            param: "tool_choice".into(),
        })),
        (None, None) => Ok(None),
    }
}

/// Writes the tool calls a response refused to the audit log.
pub struct ToolAudit {
    guard: Option<Arc<crate::guard::ServerGuard>>,
    caller: Option<Caller>,
    request_id: String,
}

impl ToolAudit {
    pub fn record(&self, refused: Vec<String>) -> Result<(), ApiError> {
        match (&self.guard, refused.is_empty()) {
            (Some(guard), false) => {
                guard.audit_refused_tool_calls(&self.request_id, self.caller.as_ref(), refused)
            }
            _ => Ok(()),
        }
    }
}
