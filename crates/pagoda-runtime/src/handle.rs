//! The cloneable async handle the rest of Pagoda uses: submit a request, get a stream of
//! outputs; drop the stream to abort. `start` loads the model (`load.rs`) and spawns the
//! engine loop (`engine_loop.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use pagoda_engine::sampling::InvalidParam;
use pagoda_engine::{FinishReason, TenantKey};
use pagoda_text::Tokenizer;

use crate::config::EngineConfig;
use crate::engine_loop::{self, Command};
use crate::error::{Result, RuntimeError};
use crate::load::{load, ModelInfo};
use crate::output_channel::{output_channel, OutputReceiver};
use crate::pending::PendingCounts;
use crate::request::{Completion, GenerateRequest, RequestOutput};
use crate::stats::EngineStats;
use pagoda_structured::Grammars;

/// What a choice's stream reports if it closes without a final output (the engine died in a
/// way that could not even answer).
const ENGINE_GONE: &str = "the engine stopped before this request finished";

pub(crate) struct Shared {
    commands: Mutex<Sender<Command>>,
    next_id: AtomicU64,
    pending: Arc<PendingCounts>,
    pub(crate) accepting: AtomicBool,
    pub(crate) alive: AtomicBool,
    pub(crate) stats: Mutex<EngineStats>,
    info: ModelInfo,
    tokenizer: Arc<Tokenizer>,
    grammars: Result<Arc<Grammars>, String>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Clone)]
pub struct EngineHandle {
    shared: Arc<Shared>,
}

/// The outputs of one submitted request (all its choices). Dropping it aborts the request;
/// its blocks are freed at the engine's next step. Every choice ends with a message whose
/// `finished` is set, with `error` set if the engine failed it: a stream never just stops.
pub struct RequestStream {
    receiver: OutputReceiver,
    /// Choices that have not had their final output yet.
    open: Vec<bool>,
}

impl std::fmt::Debug for RequestStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestStream")
    }
}

impl RequestStream {
    pub async fn next(&mut self) -> Option<RequestOutput> {
        let output = self.receiver.recv().await;
        self.track(output)
    }

    /// Tokens the engine generated for each choice so far, read or not: what the request
    /// is billed for when its caller goes away before the end.
    pub fn generated_tokens(&self) -> Vec<u64> {
        self.receiver.generated()
    }

    /// For callers outside an async runtime (the CLI).
    pub fn blocking_next(&mut self) -> Option<RequestOutput> {
        let output = self.receiver.blocking_recv();
        self.track(output)
    }

    /// Notes finished choices; once the channel closes, ends each choice still open with an
    /// error.
    fn track(&mut self, output: Option<RequestOutput>) -> Option<RequestOutput> {
        if let Some(output) = output {
            if output.finished.is_some() {
                if let Some(open) = self.open.get_mut(output.index) {
                    *open = false;
                }
            }
            return Some(output);
        }
        let index = self.open.iter().position(|&open| open)?;
        self.open[index] = false;
        let completion = Completion {
            finish_reason: FinishReason::Abort,
            usage: Default::default(),
            timings: Default::default(),
            error: Some(ENGINE_GONE.to_string()),
            cause: Default::default(),
        };
        Some(RequestOutput::last(index, completion))
    }
}

/// Loads the model, tokenizer and generation config, sizes the KV cache, and starts the
/// engine thread.
pub fn start(config: EngineConfig) -> Result<EngineHandle> {
    let loaded = load(&config)?;
    let (sender, receiver) = channel();
    let shared = Arc::new(Shared {
        commands: Mutex::new(sender),
        next_id: AtomicU64::new(1),
        pending: PendingCounts::new(
            config.max_pending_requests,
            config.max_pending_per_tenant.max(1),
        ),
        accepting: AtomicBool::new(true),
        alive: AtomicBool::new(true),
        stats: Mutex::new(loaded.core.stats().clone()),
        info: loaded.info,
        tokenizer: loaded.tokenizer,
        grammars: loaded.grammars,
        thread: Mutex::new(None),
    });
    let thread = engine_loop::spawn(loaded.core, receiver, shared.clone())
        .map_err(|_| RuntimeError::EngineStopped)?;
    *shared.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
    Ok(EngineHandle { shared })
}

impl EngineHandle {
    pub fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.shared.tokenizer
    }

    /// The compiler of output constraints for this model's vocabulary.
    pub fn grammars(&self) -> Result<&Arc<Grammars>> {
        self.shared
            .grammars
            .as_ref()
            .map_err(|reason| RuntimeError::StructuredUnavailable(reason.clone()))
    }

    pub fn stats(&self) -> EngineStats {
        self.shared
            .stats
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The engine thread is running and accepting work.
    pub fn is_alive(&self) -> bool {
        self.shared.alive.load(Ordering::SeqCst)
    }

    /// Sequences submitted and not yet finished (choices counted one by one).
    pub fn num_in_flight(&self) -> usize {
        self.shared.pending.total()
    }

    /// Sequences of one tenant (`None`: the anonymous tenant) submitted and not yet finished.
    pub fn num_in_flight_for(&self, tenant: Option<&TenantKey>) -> usize {
        self.shared.pending.of_tenant(tenant)
    }

    /// Checks `request` as the engine would, without queueing it.
    pub fn validate(&self, request: &GenerateRequest) -> Result<()> {
        let info = &self.shared.info;
        let sampling = &request.sampling;
        sampling
            .validate()
            .map_err(pagoda_engine::EngineError::from)?;
        sampling
            .validate_token_ids(info.vocab_size)
            .map_err(pagoda_engine::EngineError::from)?;
        let pending = &self.shared.pending;
        let max_n = pending.max_total().min(pending.max_per_tenant());
        if sampling.n > max_n {
            // Could never be admitted: a bad request, not a busy engine.
            let reason = format!("must be at most {max_n} on this server");
            return Err(
                pagoda_engine::EngineError::from(InvalidParam { field: "n", reason }).into(),
            );
        }
        if let Some(&token) = request
            .prompt_token_ids
            .iter()
            .find(|&&t| t as usize >= info.vocab_size)
        {
            return Err(RuntimeError::TokenOutOfRange {
                token,
                vocab_size: info.vocab_size,
            });
        }
        if request.prompt_token_ids.is_empty() {
            return Err(pagoda_engine::EngineError::EmptyPrompt.into());
        }
        let prompt_tokens = request.prompt_token_ids.len();
        let max_tokens = request.sampling.max_tokens.unwrap_or(0);
        // Saturating: a client's max_tokens near usize::MAX must not wrap to a small total.
        if prompt_tokens.saturating_add(max_tokens) > info.max_model_len
            || prompt_tokens >= info.max_model_len
        {
            return Err(RuntimeError::ContextOverflow {
                prompt_tokens,
                max_tokens,
                limit: info.max_model_len,
            });
        }
        Ok(())
    }

    /// Queues a request; its outputs arrive on the returned stream. Refused with `QueueFull`
    /// when the engine has `max_pending_requests` sequences in flight, and with
    /// `TenantQueueFull` when the request's tenant has `max_pending_per_tenant`.
    pub fn submit(&self, request: GenerateRequest) -> Result<RequestStream> {
        self.validate(&request)?;
        if !self.shared.accepting.load(Ordering::SeqCst) {
            return Err(RuntimeError::EngineStopped);
        }
        let n = request.sampling.n.max(1);
        let pending = self.shared.pending.reserve(request.tenant.as_ref(), n)?;
        let first_id = self.shared.next_id.fetch_add(n as u64, Ordering::SeqCst);
        let (sender, receiver) = output_channel(n);
        let command = Command::Add {
            first_id,
            request: Box::new(request),
            sender,
            submitted: Instant::now(),
            pending,
        };
        let sent = self
            .shared
            .commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(command);
        if sent.is_err() {
            // The command, and with it the pending places, came back and is dropped.
            return Err(RuntimeError::EngineStopped);
        }
        Ok(RequestStream {
            receiver,
            open: vec![true; n],
        })
    }

    /// Every block hash in the prefix cache, read by the engine thread between steps (for
    /// checking a router's copy built from the KV events).
    pub async fn prefix_cache_hashes(&self) -> Result<Vec<pagoda_engine::BlockHash>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.shared
            .commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Command::PrefixCacheHashes(reply))
            .map_err(|_| RuntimeError::EngineStopped)?;
        answer.await.map_err(|_| RuntimeError::EngineStopped)
    }

    /// Stops admission; the engine finishes what is in flight, then its thread exits.
    pub fn shutdown(&self) {
        self.shared.accepting.store(false, Ordering::SeqCst);
        let _ = self
            .shared
            .commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(Command::Shutdown);
    }

    /// Waits for the engine thread to exit (after `shutdown`).
    pub fn join(&self) {
        let thread = self
            .shared
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Usage;

    fn finished(index: usize) -> RequestOutput {
        let completion = Completion {
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
            timings: Default::default(),
            error: None,
            cause: Default::default(),
        };
        RequestOutput::last(index, completion)
    }

    #[test]
    fn a_stream_closed_early_ends_each_open_choice_with_an_error() {
        let (sender, receiver) = output_channel(3);
        let mut stream = RequestStream {
            receiver,
            open: vec![true; 3],
        };
        sender.send(finished(1));
        drop(sender);
        assert_eq!(stream.blocking_next().unwrap().index, 1);
        for index in [0, 2] {
            let out = stream.blocking_next().unwrap();
            assert_eq!(out.index, index);
            let completion = out.finished.unwrap();
            assert_eq!(completion.finish_reason, FinishReason::Abort);
            assert_eq!(completion.error.as_deref(), Some(ENGINE_GONE));
        }
        assert!(stream.blocking_next().is_none());
    }

    #[test]
    fn a_stream_whose_choices_all_finished_just_ends() {
        let (sender, receiver) = output_channel(1);
        let mut stream = RequestStream {
            receiver,
            open: vec![true; 1],
        };
        sender.send(finished(0));
        drop(sender);
        assert!(stream
            .blocking_next()
            .unwrap()
            .finished
            .unwrap()
            .error
            .is_none());
        assert!(stream.blocking_next().is_none());
    }
}
