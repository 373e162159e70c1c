//! `POST /v1/chat/completions`.

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
use crate::prompt::{self, ChatRender};
use crate::routes::{read_body, ResponseMeta};
use crate::sampling::{self, EndpointSampling};
use crate::sse;
use crate::state::AppState;
use crate::wire::request::{parse_fields, parse_json, ChatFields, CommonParams};
use crate::wire::response::{
    AssistantMessage, ChatChoice, ChatChunk, ChatChunkChoice, ChatCompletion, Delta, UsageInfo,
};

pub async fn handle(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let json = parse_json(&read_body(body)?)?;
    let common: CommonParams = parse_fields(&json)?;
    let mut chat: ChatFields = parse_fields(&json)?;
    state.check_model(common.model.as_deref())?;
    tracing::debug!(
        user = common.user.as_deref(),
        stream = common.streaming(),
        "chat completion request"
    );
    let loaded = state.ready()?;
    let meta = ResponseMeta {
        id: new_id("chatcmpl"),
        created: unix_now(),
        model: state.model_name().to_string(),
    };
    let guarded = guard::screen_chat(&state, caller.as_ref(), &meta.id, &mut chat.messages)?;

    let text = prompt::render_chat(
        loaded,
        &ChatRender {
            messages: &chat.messages,
            add_generation_prompt: chat.add_generation_prompt,
            continue_final_message: chat.continue_final_message,
            chat_template_kwargs: chat.chat_template_kwargs.as_ref(),
            tools: chat.tools.as_ref(),
        },
    )?;
    let prompt_token_ids = prompt::encode_chat(loaded, &text)?;
    let wants_logprobs = chat.logprobs.unwrap_or(false);
    if chat.top_logprobs.is_some() && !wants_logprobs {
        return Err(ApiError::invalid(
            "top_logprobs",
            "`top_logprobs` requires `logprobs` to be true",
        ));
    }
    let top_n = chat.top_logprobs.unwrap_or(0);
    let sampling = sampling::build(
        &common,
        EndpointSampling {
            logprobs: wants_logprobs.then_some(top_n),
            logprobs_param: "top_logprobs",
            default_max_tokens: None,
        },
        loaded.engine.info(),
        prompt_token_ids.len(),
    )?;
    let n = sampling.n;
    let mut request = GenerateRequest {
        prompt_token_ids,
        sampling,
        priority: common.priority.unwrap_or(0),
        cache_salt: common.cache_salt.clone(),
        skip_special_tokens: common.skip_special_tokens.unwrap_or(true),
    };
    let ticket = gateway::admit(
        &state,
        caller.as_ref(),
        &meta.id,
        common.model.as_deref(),
        std::slice::from_mut(&mut request),
    )
    .await?;
    let streams = generate::submit(&state, loaded, vec![request])?;
    let streams = gateway::attach(streams, ticket);
    let tokenizer = loaded.engine.tokenizer().clone();
    let logprobs = wants_logprobs.then_some(top_n);
    if common.streaming() {
        let stream = ChatStream {
            meta,
            guard: StreamGuard::new(guarded, n),
            merged: generate::merge(streams),
            n,
            logprobs,
            tokenizer,
            include_usage: common.include_usage(),
            usage: UsageInfo::default(),
            phase: Phase::Roles,
        };
        return Ok(sse::response(stream.frames()));
    }

    let (mut results, usage) = generate::collect(streams, n).await?;
    guard::filter_results(guarded.as_ref(), &mut results);
    let choices = results
        .into_iter()
        .enumerate()
        .map(|(index, r)| ChatChoice {
            index,
            logprobs: logprobs.map(|top| logprobs::chat(&tokenizer, &r.logprobs, top)),
            message: AssistantMessage {
                role: "assistant",
                content: r.text,
            },
            finish_reason: r.finish_reason,
        })
        .collect();
    Ok(Json(ChatCompletion {
        id: meta.id,
        object: "chat.completion",
        created: meta.created,
        model: meta.model,
        choices,
        usage,
    })
    .into_response())
}

enum Phase {
    Roles,
    Tokens,
    Done,
}

/// The state of one streamed chat response.
struct ChatStream {
    meta: ResponseMeta,
    guard: Option<StreamGuard>,
    merged: Merged,
    n: usize,
    logprobs: Option<usize>,
    tokenizer: Arc<Tokenizer>,
    include_usage: bool,
    usage: UsageInfo,
    phase: Phase,
}

impl ChatStream {
    fn frames(
        self,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send {
        stream::unfold(self, |mut s| async move {
            let bytes = s.next_frames().await?;
            Some((Ok(bytes), s))
        })
    }

    async fn next_frames(&mut self) -> Option<Bytes> {
        match self.phase {
            Phase::Roles => {
                self.phase = Phase::Tokens;
                let choices = (0..self.n)
                    .map(|index| ChatChunkChoice {
                        index,
                        delta: Delta {
                            role: Some("assistant"),
                            content: Some(String::new()),
                        },
                        logprobs: None,
                        finish_reason: None,
                    })
                    .collect();
                Some(self.chunk(choices, None))
            }
            Phase::Tokens => loop {
                match self.merged.next().await {
                    Some((_, out)) => {
                        if let Some(err) = generate::engine_failure(&out) {
                            self.phase = Phase::Done;
                            return Some(error_frames(err));
                        }
                        if let Some(frame) = self.on_output(out) {
                            return Some(frame);
                        }
                    }
                    None => {
                        self.phase = Phase::Done;
                        let mut out = Vec::new();
                        if self.include_usage {
                            out.extend_from_slice(&self.chunk(Vec::new(), Some(self.usage)));
                        }
                        out.extend_from_slice(&sse::done());
                        return Some(Bytes::from(out));
                    }
                }
            },
            Phase::Done => None,
        }
    }

    fn on_output(&mut self, mut out: RequestOutput) -> Option<Bytes> {
        StreamGuard::filter(&mut self.guard, out.index, &mut out);
        generate::add_usage(&mut self.usage, &out);
        let logprobs = match self.logprobs {
            Some(top) if !out.logprobs.is_empty() => {
                Some(logprobs::chat(&self.tokenizer, &out.logprobs, top))
            }
            _ => None,
        };
        let finish_reason = out.finished.as_ref().map(|d| d.finish_reason.as_str());
        if out.text.is_empty() && logprobs.is_none() && finish_reason.is_none() {
            return None;
        }
        let choice = ChatChunkChoice {
            index: out.index,
            delta: Delta {
                role: None,
                content: (!out.text.is_empty() || finish_reason.is_none()).then_some(out.text),
            },
            logprobs,
            finish_reason,
        };
        Some(self.chunk(vec![choice], None))
    }

    fn chunk(&self, choices: Vec<ChatChunkChoice>, usage: Option<UsageInfo>) -> Bytes {
        sse::frame(&ChatChunk {
            id: &self.meta.id,
            object: "chat.completion.chunk",
            created: self.meta.created,
            model: &self.meta.model,
            choices,
            usage: self.include_usage.then_some(usage),
        })
    }
}

/// An engine failure after the stream started: an error event, then the end.
pub fn error_frames(err: ApiError) -> Bytes {
    if let ApiError::Internal(detail) = &err {
        tracing::error!(%detail, "streamed request failed");
    }
    let mut out = sse::frame(&err.body()).to_vec();
    out.extend_from_slice(&sse::done());
    Bytes::from(out)
}
