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

use crate::chat_output::{ChoiceParser, Piece};
use crate::error::ApiError;
use crate::gateway::Caller;
use crate::generate::{self, Merged};
use crate::guard::{self, StreamGuard};
use crate::logprobs;
use crate::pipeline::{self, Endpoint, ResponseMeta, Submitted, ToolAudit};
use crate::routes::read_body;
use crate::sse;
use crate::state::AppState;
use crate::wire::response::{
    AssistantMessage, ChatChoice, ChatChunk, ChatChunkChoice, ChatCompletion, Delta, FunctionCall,
    FunctionDelta, ToolCall, ToolCallDelta, UsageInfo,
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
        output,
        tool_audit,
        ..
    } = submitted;
    let (mut results, usage) = generate::collect(streams, n).await?;
    guard::filter_texts(guarded.as_ref(), results.iter_mut().map(|r| &mut r.text))?;
    let mut refused = Vec::new();
    let choices = results
        .into_iter()
        .enumerate()
        .map(|(index, r)| {
            let mut parser = output.parser();
            let mut pieces = parser.push(&r.text);
            pieces.extend(parser.finish());
            refused.extend_from_slice(parser.refused());
            let message = assistant_message(pieces);
            let finish_reason = match message.tool_calls.is_empty() {
                true => r.finish_reason,
                false => Some("tool_calls"),
            };
            ChatChoice {
                index,
                logprobs: logprobs.map(|top| logprobs::chat(&tokenizer, &r.logprobs, top)),
                message,
                finish_reason,
            }
        })
        .collect();
    tool_audit.record(refused)?;
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

/// A whole choice's pieces as one message.
fn assistant_message(pieces: Vec<Piece>) -> AssistantMessage {
    let mut content = String::new();
    let mut reasoning: Option<String> = None;
    let mut tool_calls = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Content(text) => content.push_str(&text),
            Piece::Reasoning(text) => reasoning.get_or_insert_default().push_str(&text),
            Piece::Call(call) => tool_calls.push(ToolCall {
                id: call.id,
                kind: "function",
                function: FunctionCall {
                    name: call.name,
                    arguments: call.arguments,
                },
            }),
        }
    }
    AssistantMessage {
        role: "assistant",
        content: (tool_calls.is_empty() || !content.trim().is_empty()).then_some(content),
        reasoning_content: reasoning,
        tool_calls,
    }
}

/// A piece as the deltas OpenAI streams: a call is its header, then its arguments.
fn deltas(piece: Piece) -> Vec<Delta> {
    match piece {
        Piece::Content(text) => vec![Delta {
            content: Some(text),
            ..Delta::default()
        }],
        Piece::Reasoning(text) => vec![Delta {
            reasoning_content: Some(text),
            ..Delta::default()
        }],
        Piece::Call(call) => vec![
            Delta {
                tool_calls: Some(vec![ToolCallDelta {
                    index: call.index,
                    id: Some(call.id),
                    kind: Some("function"),
                    function: FunctionDelta {
                        name: Some(call.name),
                        arguments: String::new(),
                    },
                }]),
                ..Delta::default()
            },
            Delta {
                tool_calls: Some(vec![ToolCallDelta {
                    index: call.index,
                    id: None,
                    kind: None,
                    function: FunctionDelta {
                        name: None,
                        arguments: call.arguments,
                    },
                }]),
                ..Delta::default()
            },
        ],
    }
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
    parsers: Vec<ChoiceParser>,
    /// Whether each choice issued a tool call (its finish reason is then `tool_calls`).
    called: Vec<bool>,
    tool_audit: ToolAudit,
    refused: Vec<String>,
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
            parsers: (0..s.n).map(|_| s.output.parser()).collect(),
            called: vec![false; s.n],
            tool_audit: s.tool_audit,
            refused: Vec::new(),
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
                            ..Delta::default()
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
                        if let Err(err) = self.tool_audit.record(std::mem::take(&mut self.refused))
                        {
                            return Some(error_frames(err));
                        }
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
        let finished = out.finished.is_some();
        let index = out.index;
        let parser = self.parsers.get_mut(index)?;
        let mut pieces = parser.push(&out.text);
        if finished {
            pieces.extend(parser.finish());
            self.refused.extend_from_slice(parser.refused());
        }
        let mut deltas: Vec<Delta> = pieces.into_iter().flat_map(deltas).collect();
        if deltas.iter().any(|d| d.tool_calls.is_some()) {
            self.called[index] = true;
        }
        let finish_reason = out.finished.as_ref().map(|d| match self.called[index] {
            true => "tool_calls",
            false => d.finish_reason.as_str(),
        });
        if deltas.is_empty() {
            if logprobs.is_none() && finish_reason.is_none() {
                return None;
            }
            deltas.push(Delta {
                content: finish_reason.is_none().then(String::new),
                ..Delta::default()
            });
        }
        let last = deltas.len() - 1;
        let mut logprobs = logprobs;
        let mut frames = Vec::new();
        for (i, delta) in deltas.into_iter().enumerate() {
            let choice = ChatChunkChoice {
                index,
                delta,
                logprobs: logprobs.take(),
                finish_reason: if i == last { finish_reason } else { None },
            };
            frames.extend_from_slice(&self.chunk(vec![choice], None));
        }
        Some(Bytes::from(frames))
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
