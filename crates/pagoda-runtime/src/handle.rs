//! The engine on its own OS thread, and the cloneable async handle the rest of Pagoda uses.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the engine loop waits for a command after a step that scheduled nothing.
const IDLE_WAIT: Duration = Duration::from_millis(5);

use pagoda_engine::sampling::InvalidParam;
use pagoda_engine::{Scheduler, SchedulerConfig};
use pagoda_models::loader::load_model;
use pagoda_models::{Architecture, GenerationConfig, KvCacheShape, ModelRunner, WeightDtype};
use pagoda_text::Tokenizer;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use crate::config::EngineConfig;
use crate::core::EngineCore;
use crate::error::{Result, RuntimeError};
use crate::request::{GenerateRequest, RequestOutput};
use crate::stats::EngineStats;

/// Facts about the loaded model that callers need.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    pub model_dir: PathBuf,
    pub architecture: Architecture,
    pub max_model_len: usize,
    pub vocab_size: usize,
    pub eos_token_ids: Vec<u32>,
    pub generation_config: GenerationConfig,
    pub weight_dtype: WeightDtype,
    pub weight_bytes: usize,
    pub kv_cache: KvCacheShape,
    pub kv_cache_bytes: u64,
}

enum Command {
    Add {
        first_id: u64,
        request: Box<GenerateRequest>,
        sender: tokio::sync::mpsc::UnboundedSender<RequestOutput>,
        submitted: Instant,
    },
    Shutdown,
}

struct Shared {
    commands: Mutex<Sender<Command>>,
    next_id: AtomicU64,
    in_flight: AtomicUsize,
    accepting: AtomicBool,
    alive: AtomicBool,
    stats: Mutex<EngineStats>,
    info: ModelInfo,
    tokenizer: Arc<Tokenizer>,
    max_pending: usize,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Clone)]
pub struct EngineHandle {
    shared: Arc<Shared>,
}

/// The outputs of one submitted request (all its choices). Dropping it aborts the request;
/// its blocks are freed at the engine's next step.
pub struct RequestStream {
    receiver: UnboundedReceiver<RequestOutput>,
}

impl std::fmt::Debug for RequestStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestStream")
    }
}

impl RequestStream {
    pub async fn next(&mut self) -> Option<RequestOutput> {
        self.receiver.recv().await
    }

    /// For callers outside an async runtime (the CLI).
    pub fn blocking_next(&mut self) -> Option<RequestOutput> {
        self.receiver.blocking_recv()
    }
}

/// Loads the model, tokenizer and generation config, sizes the KV cache, and starts the
/// engine thread.
pub fn start(config: EngineConfig) -> Result<EngineHandle> {
    let (model, weight_dtype) = load_model(&config.model_dir, &config.load)?;
    let tokenizer = Arc::new(Tokenizer::from_file(
        &config.model_dir.join("tokenizer.json"),
    )?);
    let generation_config = GenerationConfig::load_optional(&config.model_dir)?;
    let model_cfg = model.config.clone();
    let max_model_len = config
        .max_model_len
        .unwrap_or(model_cfg.max_position_embeddings);
    if max_model_len > model_cfg.max_position_embeddings {
        return Err(pagoda_models::ModelError::ConfigField {
            field: "max_model_len",
            problem: format!(
                "({max_model_len}) exceeds the model's max_position_embeddings ({})",
                model_cfg.max_position_embeddings
            ),
        }
        .into());
    }
    let kv_shape = KvCacheShape::from_budget(
        &model_cfg,
        config.block_size,
        config.kv_cache_memory,
        max_model_len,
    )?;
    let mut eos_token_ids = generation_config.eos_token_ids();
    if eos_token_ids.is_empty() {
        eos_token_ids = model_cfg.eos_token_ids.clone();
    }
    let scheduler = Scheduler::new(
        SchedulerConfig {
            max_num_batched_tokens: config.max_num_batched_tokens,
            max_num_seqs: config.max_num_seqs,
            max_prefill_chunk: config.max_prefill_chunk,
            block_size: config.block_size,
            num_blocks: kv_shape.num_blocks,
            max_model_len,
            enable_prefix_caching: config.enable_prefix_caching,
            ..SchedulerConfig::default()
        },
        eos_token_ids.clone(),
    )?;
    let info = ModelInfo {
        model_dir: config.model_dir.clone(),
        architecture: model_cfg.architecture,
        max_model_len,
        vocab_size: model_cfg.vocab_size,
        eos_token_ids,
        generation_config,
        weight_dtype,
        weight_bytes: model.weight_bytes(),
        kv_cache: kv_shape,
        kv_cache_bytes: kv_shape.total_bytes(),
    };
    let runner = ModelRunner::new(model, kv_shape);
    let core = EngineCore::new(scheduler, runner, tokenizer.clone());
    let (sender, receiver) = channel();
    let shared = Arc::new(Shared {
        commands: Mutex::new(sender),
        next_id: AtomicU64::new(1),
        in_flight: AtomicUsize::new(0),
        accepting: AtomicBool::new(true),
        alive: AtomicBool::new(true),
        stats: Mutex::new(core.stats().clone()),
        info,
        tokenizer,
        max_pending: config.max_pending_requests,
        thread: Mutex::new(None),
    });
    let thread_shared = shared.clone();
    let thread = std::thread::Builder::new()
        .name("pagoda-engine".into())
        .spawn(move || run_loop(core, receiver, thread_shared))
        .map_err(|_| RuntimeError::EngineStopped)?;
    *shared.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
    Ok(EngineHandle { shared })
}

/// Marks the engine dead however the loop ends, panics included, so health checks see it.
struct AliveGuard(Arc<Shared>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::SeqCst);
        self.0.accepting.store(false, Ordering::SeqCst);
    }
}

fn run_loop(mut core: EngineCore, commands: Receiver<Command>, shared: Arc<Shared>) {
    let _guard = AliveGuard(shared.clone());
    let mut shutting_down = false;
    loop {
        if !core.has_work() {
            if shutting_down {
                break;
            }
            match commands.recv() {
                Ok(command) => apply(&mut core, command, &shared, &mut shutting_down),
                Err(_) => break,
            }
        }
        while let Ok(command) = commands.try_recv() {
            apply(&mut core, command, &shared, &mut shutting_down);
        }
        let aborted = core.abort_abandoned();
        let finished = core.step();
        shared
            .in_flight
            .fetch_sub(aborted + finished, Ordering::SeqCst);
        *shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = core.stats().clone();
        if core.was_idle() && core.has_work() {
            // Admission keeps every request within the KV budget, so this should not happen;
            // if it does, wait for the next command instead of spinning a core.
            if let Ok(command) = commands.recv_timeout(IDLE_WAIT) {
                apply(&mut core, command, &shared, &mut shutting_down);
            }
        }
    }
}

fn apply(core: &mut EngineCore, command: Command, shared: &Shared, shutting_down: &mut bool) {
    match command {
        Command::Add {
            first_id,
            request,
            sender,
            submitted,
        } => {
            let n = request.sampling.n.max(1);
            if let Err(e) = core.add(first_id, *request, sender.clone(), submitted) {
                // Checked before sending, so this is unexpected: report it on the stream.
                shared.in_flight.fetch_sub(n, Ordering::SeqCst);
                let completion = crate::request::Completion {
                    finish_reason: pagoda_engine::FinishReason::Abort,
                    usage: Default::default(),
                    timings: Default::default(),
                    error: Some(e.to_string()),
                };
                let _ = sender.send(RequestOutput::last(0, completion));
            }
        }
        Command::Shutdown => *shutting_down = true,
    }
}

impl EngineHandle {
    pub fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.shared.tokenizer
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

    /// Requests submitted and not yet finished (choices counted one by one).
    pub fn num_in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
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
        if sampling.n > self.shared.max_pending {
            // Could never be admitted: a bad request, not a busy engine.
            let reason = format!("must be at most {} on this server", self.shared.max_pending);
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
        if prompt_tokens + max_tokens > info.max_model_len || prompt_tokens >= info.max_model_len {
            return Err(RuntimeError::ContextOverflow {
                prompt_tokens,
                max_tokens,
                limit: info.max_model_len,
            });
        }
        Ok(())
    }

    /// Queues a request; its outputs arrive on the returned stream.
    pub fn submit(&self, request: GenerateRequest) -> Result<RequestStream> {
        self.validate(&request)?;
        if !self.shared.accepting.load(Ordering::SeqCst) {
            return Err(RuntimeError::EngineStopped);
        }
        let n = request.sampling.n.max(1);
        let previous = self.shared.in_flight.fetch_add(n, Ordering::SeqCst);
        if previous + n > self.shared.max_pending {
            self.shared.in_flight.fetch_sub(n, Ordering::SeqCst);
            return Err(RuntimeError::QueueFull {
                limit: self.shared.max_pending,
            });
        }
        let first_id = self.shared.next_id.fetch_add(n as u64, Ordering::SeqCst);
        let (sender, receiver) = unbounded_channel();
        let command = Command::Add {
            first_id,
            request: Box::new(request),
            sender,
            submitted: Instant::now(),
        };
        let sent = self
            .shared
            .commands
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .send(command);
        if sent.is_err() {
            self.shared.in_flight.fetch_sub(n, Ordering::SeqCst);
            return Err(RuntimeError::EngineStopped);
        }
        Ok(RequestStream { receiver })
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
