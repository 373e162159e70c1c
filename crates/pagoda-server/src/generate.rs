//! Submitting requests to the engine and following their output streams, feeding the
//! metrics and the gateway's meter as outputs arrive. Dropping a `Tracked` drops its engine
//! stream, which aborts the request; the choices it never finished are counted as aborted.
//! (The engine's stream itself ends every choice it never finished with an error output, so
//! no response can end as a 200 with empty content.)

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_util::stream::{self, select_all, SelectAll, Stream, StreamExt};
use pagoda_runtime::FailureCause;
use pagoda_runtime::{GenerateRequest, RequestOutput, RequestStream, TokenLogprob};

use crate::error::ApiError;
use crate::gateway;
use crate::slo::SloClass;
use crate::state::{AppState, Loaded};
use crate::wire::response::UsageInfo;

/// One submitted prompt's stream of outputs (all its `n` choices).
pub struct Tracked {
    stream: RequestStream,
    prompt_index: usize,
    state: AppState,
    last_output: Vec<Option<Instant>>,
    num_finished: usize,
    /// The gateway's meter of the request, when there is a gateway.
    ticket: Option<Arc<pagoda_gateway::Ticket>>,
    /// The SLO class it runs under, for attainment.
    slo: Option<Arc<SloClass>>,
}

impl Tracked {
    async fn next(&mut self) -> Option<RequestOutput> {
        let out = self.stream.next().await?;
        gateway::observe(self.ticket.as_deref(), self.prompt_index, &out).await;
        let now = Instant::now();
        let metrics = self.state.metrics();
        if let Some(last) = self.last_output.get_mut(out.index) {
            if !out.token_ids.is_empty() {
                if let Some(previous) = *last {
                    metrics.observe_inter_token(now - previous, out.token_ids.len());
                }
                *last = Some(now);
            }
        }
        if let Some(done) = &out.finished {
            metrics.observe_finished(done);
            if let Some(class) = &self.slo {
                metrics.slo.observe(class, done);
            }
            self.num_finished += 1;
        }
        Some(out)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(ticket) = &self.ticket {
            ticket.on_generated(self.prompt_index, &self.stream.generated_tokens());
        }
        let unfinished = self.last_output.len().saturating_sub(self.num_finished);
        if unfinished > 0 {
            self.state.metrics().observe_aborted(unfinished);
        }
    }
}

/// Validates every request, then submits them all (so a bad second prompt does not leave a
/// first one running); the gateway's ticket, if any, meters their outputs from here on.
pub fn submit(
    state: &AppState,
    loaded: &Loaded,
    requests: Vec<GenerateRequest>,
    ticket: Option<Arc<pagoda_gateway::Ticket>>,
    slo: Option<Arc<SloClass>>,
) -> Result<Vec<Tracked>, ApiError> {
    for request in &requests {
        loaded.engine.validate(request)?;
    }
    let mut tracked = Vec::with_capacity(requests.len());
    for (prompt_index, request) in requests.into_iter().enumerate() {
        let n = request.sampling.n.max(1);
        let stream = loaded.engine.submit(request)?;
        tracked.push(Tracked {
            stream,
            prompt_index,
            state: state.clone(),
            last_output: vec![None; n],
            num_finished: 0,
            ticket: ticket.clone(),
            slo: slo.clone(),
        });
    }
    if let Some(ticket) = &ticket {
        ticket.submitted();
    }
    Ok(tracked)
}

/// Outputs of all prompts as they come, tagged with their prompt's index.
pub type Merged = SelectAll<Pin<Box<dyn Stream<Item = (usize, RequestOutput)> + Send>>>;

pub fn merge(streams: Vec<Tracked>) -> Merged {
    select_all(streams.into_iter().map(|tracked| {
        let s = stream::unfold(tracked, |mut t| async move {
            let out = t.next().await?;
            Some(((t.prompt_index, out), t))
        });
        Box::pin(s) as Pin<Box<dyn Stream<Item = (usize, RequestOutput)> + Send>>
    }))
}

/// A finished choice, for non-streamed responses.
#[derive(Debug, Default)]
pub struct ChoiceResult {
    pub text: String,
    pub logprobs: Vec<TokenLogprob>,
    pub finish_reason: Option<&'static str>,
}

/// Adds a finished choice's usage: prompt figures once per prompt (from choice 0), output
/// tokens from every choice.
pub fn add_usage(usage: &mut UsageInfo, out: &RequestOutput) {
    if let Some(done) = &out.finished {
        let u = done.usage;
        let prompt = if out.index == 0 { u.prompt_tokens } else { 0 };
        let cached = if out.index == 0 { u.cached_tokens } else { 0 };
        usage.add(UsageInfo::new(prompt, cached, u.completion_tokens));
    }
}

/// The engine failed this choice (a bug, not bad input).
pub fn engine_failure(out: &RequestOutput) -> Option<ApiError> {
    let done = out.finished.as_ref()?;
    let error = done.error.as_ref()?;
    Some(match done.cause {
        FailureCause::Internal => ApiError::Internal(error.clone()),
        FailureCause::Constraint => ApiError::InvalidRequest {
            message: format!("the output constraint cannot be followed: {error}"),
            param: None,
        },
    })
}

/// Runs every prompt to the end; choices are ordered `prompt_index * n + index`.
pub async fn collect(
    streams: Vec<Tracked>,
    n: usize,
) -> Result<(Vec<ChoiceResult>, UsageInfo), ApiError> {
    let mut choices: Vec<ChoiceResult> = (0..streams.len() * n)
        .map(|_| ChoiceResult::default())
        .collect();
    let mut usage = UsageInfo::default();
    let mut merged = merge(streams);
    while let Some((prompt_index, out)) = merged.next().await {
        if let Some(err) = engine_failure(&out) {
            return Err(err);
        }
        add_usage(&mut usage, &out);
        let Some(choice) = choices.get_mut(prompt_index * n + out.index) else {
            continue;
        };
        choice.text.push_str(&out.text);
        choice.logprobs.extend(out.logprobs);
        if let Some(done) = out.finished {
            choice.finish_reason = Some(done.finish_reason.as_str());
        }
    }
    Ok((choices, usage))
}
