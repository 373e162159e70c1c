//! `POST /v1/completions`: one or more prompts, `n` choices each.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::stream::{self, StreamExt};
use pagoda_runtime::{GenerateRequest, RequestOutput};
use pagoda_text::Tokenizer;

use crate::error::ApiError;
use crate::gateway::{self, Caller};
use crate::generate::{self, Merged};
use crate::guard::{self, StreamGuard};
use crate::ids::{new_id, unix_now};
use crate::logprobs;
use crate::prompt::{self, Prompt};
use crate::routes::chat::error_frames;
use crate::routes::{read_body, ResponseMeta};
use crate::sampling::{self, EndpointSampling};
use crate::sse;
use crate::state::AppState;
use crate::wire::request::{parse_fields, parse_json, CommonParams, CompletionFields};
use crate::wire::response::{Completion, CompletionChoice, CompletionChunk, UsageInfo};

/// OpenAI's default for this endpoint.
const DEFAULT_MAX_TOKENS: usize = 16;

pub async fn handle(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let json = parse_json(&read_body(body)?)?;
    let common: CommonParams = parse_fields(&json)?;
    let mut fields: CompletionFields = parse_fields(&json)?;
    state.check_model(common.model.as_deref())?;
    tracing::debug!(
        user = common.user.as_deref(),
        stream = common.streaming(),
        "completion request"
    );
    let loaded = state.ready()?;
    if fields.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::invalid("suffix", "`suffix` is not supported"));
    }
    if let Some(best_of) = fields.best_of {
        if best_of != common.n.unwrap_or(1) {
            return Err(ApiError::invalid(
                "best_of",
                "`best_of` is only supported equal to `n`",
            ));
        }
    }
    let echo = fields.echo.unwrap_or(false);
    if echo && fields.logprobs.is_some() {
        return Err(ApiError::invalid(
            "echo",
            "`echo` together with `logprobs` is not supported",
        ));
    }

    let meta = ResponseMeta {
        id: new_id("cmpl"),
        created: unix_now(),
        model: state.model_name().to_string(),
    };
    let guarded = guard::screen_prompts(
        &state,
        caller.as_ref(),
        &meta.id,
        loaded.engine.tokenizer(),
        &mut fields.prompt,
    )?;
    let add_special_tokens = fields.add_special_tokens.unwrap_or(true);
    let mut prompts = prompt::completion_prompts(loaded, fields.prompt, add_special_tokens)?;
    let tokenizer = loaded.engine.tokenizer().clone();
    let mut requests = Vec::with_capacity(prompts.len());
    for p in &prompts {
        let sampling = sampling::build(
            &common,
            EndpointSampling {
                logprobs: fields.logprobs,
                logprobs_param: "logprobs",
                default_max_tokens: Some(DEFAULT_MAX_TOKENS),
            },
            loaded.engine.info(),
            p.token_ids.len(),
        )?;
        requests.push(GenerateRequest {
            prompt_token_ids: p.token_ids.clone(),
            sampling,
            priority: common.priority.unwrap_or(0),
            cache_salt: common.cache_salt.clone(),
            skip_special_tokens: common.skip_special_tokens.unwrap_or(true),
        });
    }
    let n = common.n.unwrap_or(1);
    if echo {
        for p in &mut prompts {
            if p.text.is_none() {
                p.text = Some(
                    tokenizer
                        .decode(&p.token_ids, false)
                        .map_err(|e| ApiError::Internal(e.to_string()))?,
                );
            }
        }
    }
    let echoes: Vec<String> = prompts
        .into_iter()
        .map(|p: Prompt| {
            if echo {
                p.text.unwrap_or_default()
            } else {
                String::new()
            }
        })
        .collect();
    let ticket = gateway::admit(
        &state,
        caller.as_ref(),
        &meta.id,
        common.model.as_deref(),
        &mut requests,
    )
    .await?;
    let streams = generate::submit(&state, loaded, requests)?;
    let streams = gateway::attach(streams, ticket);
    if common.streaming() {
        let stream = CompletionStream {
            meta,
            guard: StreamGuard::new(guarded, echoes.len() * n),
            merged: generate::merge(streams),
            n,
            logprobs: fields.logprobs,
            offsets: vec![0; echoes.len() * n],
            echoes: Some(echoes),
            tokenizer,
            include_usage: common.include_usage(),
            usage: UsageInfo::default(),
            done: false,
        };
        return Ok(sse::response(stream.frames()));
    }

    let (mut results, usage) = generate::collect(streams, n).await?;
    guard::filter_results(guarded.as_ref(), &mut results);
    let choices = results
        .into_iter()
        .enumerate()
        .map(|(index, r)| {
            let mut text = echoes[index / n].clone();
            text.push_str(&r.text);
            CompletionChoice {
                index,
                logprobs: fields
                    .logprobs
                    .map(|top| logprobs::completion(&tokenizer, &r.logprobs, top, 0)),
                text,
                finish_reason: r.finish_reason,
            }
        })
        .collect();
    Ok(Json(Completion {
        id: meta.id,
        object: "text_completion",
        created: meta.created,
        model: meta.model,
        choices,
        usage,
    })
    .into_response())
}

/// The state of one streamed completions response.
struct CompletionStream {
    meta: ResponseMeta,
    guard: Option<StreamGuard>,
    merged: Merged,
    n: usize,
    logprobs: Option<usize>,
    /// Text length so far per choice, for `text_offset`.
    offsets: Vec<usize>,
    /// Prompt texts still to echo (sent first).
    echoes: Option<Vec<String>>,
    tokenizer: Arc<Tokenizer>,
    include_usage: bool,
    usage: UsageInfo,
    done: bool,
}

impl CompletionStream {
    fn frames(
        self,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
        stream::unfold(self, |mut s| async move {
            let bytes = s.next_frames().await?;
            Some((Ok(bytes), s))
        })
    }

    async fn next_frames(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if let Some(echoes) = self.echoes.take() {
            let choices: Vec<CompletionChoice> = (0..echoes.len() * self.n)
                .filter(|i| !echoes[i / self.n].is_empty())
                .map(|index| CompletionChoice {
                    index,
                    text: echoes[index / self.n].clone(),
                    logprobs: None,
                    finish_reason: None,
                })
                .collect();
            if !choices.is_empty() {
                return Some(self.chunk(choices, None));
            }
        }
        loop {
            match self.merged.next().await {
                Some((prompt_index, out)) => {
                    if let Some(err) = generate::engine_failure(&out) {
                        self.done = true;
                        return Some(error_frames(err));
                    }
                    if let Some(frame) = self.on_output(prompt_index, out) {
                        return Some(frame);
                    }
                }
                None => {
                    self.done = true;
                    let mut out = Vec::new();
                    if self.include_usage {
                        out.extend_from_slice(&self.chunk(Vec::new(), Some(self.usage)));
                    }
                    out.extend_from_slice(&sse::done());
                    return Some(Bytes::from(out));
                }
            }
        }
    }

    fn on_output(&mut self, prompt_index: usize, mut out: RequestOutput) -> Option<Bytes> {
        generate::add_usage(&mut self.usage, &out);
        let index = prompt_index * self.n + out.index;
        StreamGuard::filter(&mut self.guard, index, &mut out);
        let offset = self.offsets.get(index).copied().unwrap_or(0);
        let logprobs = match self.logprobs {
            Some(top) if !out.logprobs.is_empty() => Some(logprobs::completion(
                &self.tokenizer,
                &out.logprobs,
                top,
                offset,
            )),
            _ => None,
        };
        let finish_reason = out.finished.as_ref().map(|d| d.finish_reason.as_str());
        if out.text.is_empty() && logprobs.is_none() && finish_reason.is_none() {
            return None;
        }
        if let Some(o) = self.offsets.get_mut(index) {
            *o += out.text.len();
        }
        let choice = CompletionChoice {
            index,
            text: out.text,
            logprobs,
            finish_reason,
        };
        Some(self.chunk(vec![choice], None))
    }

    fn chunk(&self, choices: Vec<CompletionChoice>, usage: Option<UsageInfo>) -> Bytes {
        sse::frame(&CompletionChunk {
            id: &self.meta.id,
            object: "text_completion",
            created: self.meta.created,
            model: &self.meta.model,
            choices,
            usage: self.include_usage.then_some(usage),
        })
    }
}
