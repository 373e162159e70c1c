//! `POST /v1/completions`: the shared pipeline, then OpenAI's completions wire format (one
//! or more prompts, `n` choices each).

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
use crate::routes::chat::error_frames;
use crate::routes::read_body;
use crate::sse;
use crate::state::AppState;
use crate::wire::response::{Completion, CompletionChoice, CompletionChunk, UsageInfo};

pub async fn handle(
    State(state): State<AppState>,
    caller: Option<Extension<Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = read_body(body)?;
    let caller = caller.map(|Extension(c)| c);
    let submitted = pipeline::run(&state, caller, body, Endpoint::Completions).await?;
    if submitted.stream {
        return Ok(sse::response(CompletionStream::new(submitted).frames()));
    }
    let Submitted {
        meta,
        streams,
        guarded,
        n,
        echoes,
        logprobs,
        tokenizer,
        ..
    } = submitted;
    let (mut results, usage) = generate::collect(streams, n).await?;
    guard::filter_texts(guarded.as_ref(), results.iter_mut().map(|r| &mut r.text))?;
    let choices = results
        .into_iter()
        .enumerate()
        .map(|(index, r)| {
            let mut text = echoes.get(index / n).cloned().unwrap_or_default();
            text.push_str(&r.text);
            CompletionChoice {
                index,
                logprobs: logprobs.map(|top| logprobs::completion(&tokenizer, &r.logprobs, top, 0)),
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
    fn new(s: Submitted) -> CompletionStream {
        let choices = s.num_choices();
        CompletionStream {
            guard: StreamGuard::new(s.guarded, choices),
            merged: generate::merge(s.streams),
            n: s.n,
            logprobs: s.logprobs,
            offsets: vec![0; choices],
            echoes: Some(s.echoes),
            tokenizer: s.tokenizer,
            include_usage: s.include_usage,
            usage: UsageInfo::default(),
            done: false,
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
        if let Err(err) = StreamGuard::filter(&mut self.guard, index, &mut out) {
            self.done = true;
            return Some(error_frames(err));
        }
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
