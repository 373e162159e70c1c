//! `POST /v1/chat/completions`: the shared pipeline, then OpenAI's chat wire format.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::stream::{self, StreamExt};
use pagoda_runtime::RequestOutput;
use pagoda_text::Tokenizer;

use crate::error::ApiError;
use crate::gateway::Caller;
use crate::generate::{self, Merged};
use crate::guard::{self, StreamGuard};
use crate::logprobs;
use crate::pipeline::{self, Endpoint, ResponseMeta, Submitted};
use crate::routes::read_body;
use crate::sse;
use crate::state::AppState;
use crate::wire::response::{
    AssistantMessage, ChatChoice, ChatChunk, ChatChunkChoice, ChatCompletion, Delta, UsageInfo,
};

pub async fn handle(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(body)?;
    let caller = caller.map(|Extension(c)| c);
    let submitted = pipeline::run(&state, caller, body, Endpoint::Chat).await?;
    if submitted.stream {
        return Ok(sse::response(ChatStream::new(submitted).frames()));
    }
    let Submitted {
        meta,
        streams,
        guarded,
        n,
        logprobs,
        tokenizer,
        ..
    } = submitted;
    let (mut results, usage) = generate::collect(streams, n).await?;
    guard::filter_texts(guarded.as_ref(), results.iter_mut().map(|r| &mut r.text))?;
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
    fn new(s: Submitted) -> ChatStream {
        ChatStream {
            guard: StreamGuard::new(s.guarded, s.n),
            merged: generate::merge(s.streams),
            n: s.n,
            logprobs: s.logprobs,
            tokenizer: s.tokenizer,
            include_usage: s.include_usage,
            usage: UsageInfo::default(),
            phase: Phase::Roles,
            meta: s.meta,
        }
    }

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
        if let Err(err) = StreamGuard::filter(&mut self.guard, out.index, &mut out) {
            self.phase = Phase::Done;
            return Some(error_frames(err));
        }
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
