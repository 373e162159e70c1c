//! What every handler shares: the served names, the engine once it is loaded, the metrics,
//! the request caps, the blocking pool for CPU-heavy request work, and whether the server is
//! draining.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use pagoda_gateway::Gateway;
use pagoda_runtime::EngineHandle;
use pagoda_text::chat_template::ChatTemplate;
use tokio::sync::Semaphore;

use crate::chat_output::ChatFeatures;
use crate::console::Console;
use crate::error::{ApiError, ServerError};
use crate::guard::ServerGuard;
use crate::limits::RequestLimits;
use crate::metrics::Metrics;
use crate::slo::SloClasses;

/// The loaded model: the engine and the chat template requests are rendered with.
pub struct Loaded {
    pub engine: EngineHandle,
    pub chat_template: Option<ChatTemplate>,
}

#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    served_model_names: Vec<String>,
    loaded: OnceLock<Loaded>,
    metrics: Metrics,
    draining: AtomicBool,
    created: u64,
    /// Tenants, keys, limits and metering; unset means an open single-tenant server.
    gateway: OnceLock<Arc<Gateway>>,
    /// Guardrail policies and the audit log; unset means no screening.
    guard: OnceLock<Arc<ServerGuard>>,
    limits: RequestLimits,
    /// How chat outputs are split into reasoning, content and tool calls.
    chat_features: OnceLock<ChatFeatures>,
    /// Latency classes requests run under.
    slo_classes: OnceLock<Arc<SloClasses>>,
    kv_events: OnceLock<Arc<crate::kv_events::KvEventStats>>,
    /// Permits to run request work (parsing, guard scans, rendering, tokenization) on the
    /// blocking pool: one per core, so that work never starves the I/O thread and never
    /// grows past the cores it can use.
    blocking: Semaphore,
    /// Console sign-ins and the engine history its charts draw.
    console: Console,
}

impl AppState {
    /// A server that answers 503 until `set_loaded`.
    pub fn new(served_model_names: Vec<String>) -> AppState {
        AppState::with_limits(served_model_names, RequestLimits::default())
    }

    /// A server with these request caps that answers 503 until `set_loaded`.
    pub fn with_limits(served_model_names: Vec<String>, limits: RequestLimits) -> AppState {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        AppState {
            inner: Arc::new(Inner {
                served_model_names,
                loaded: OnceLock::new(),
                metrics: Metrics::new(),
                draining: AtomicBool::new(false),
                created,
                gateway: OnceLock::new(),
                guard: OnceLock::new(),
                limits,
                chat_features: OnceLock::new(),
                slo_classes: OnceLock::new(),
                kv_events: OnceLock::new(),
                blocking: Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
                ),
                console: Console::default(),
            }),
        }
    }

    /// A server ready to answer with `engine`.
    pub fn with_engine(
        served_model_names: Vec<String>,
        engine: EngineHandle,
        chat_template: Option<ChatTemplate>,
    ) -> AppState {
        let state = AppState::new(served_model_names);
        state.set_loaded(Loaded {
            engine,
            chat_template,
        });
        state
    }

    /// Marks the model loaded; later calls are ignored.
    pub fn set_loaded(&self, loaded: Loaded) {
        let _ = self.inner.loaded.set(loaded);
    }

    /// Puts every request behind the gateway; later calls are ignored.
    pub fn set_gateway(&self, gateway: Arc<Gateway>) {
        let _ = self.inner.gateway.set(gateway);
    }

    pub fn console(&self) -> &Console {
        &self.inner.console
    }

    /// The folder of saved reports the console shows; later calls are ignored.
    pub fn set_console_reports_dir(&self, dir: std::path::PathBuf) {
        self.inner.console.set_reports_dir(dir);
    }

    pub fn gateway(&self) -> Option<&Arc<Gateway>> {
        self.inner.gateway.get()
    }

    /// Screens every request with the guardrails; later calls are ignored.
    pub fn set_guard(&self, guard: Arc<ServerGuard>) {
        let _ = self.inner.guard.set(guard);
    }

    pub fn guard(&self) -> Option<&Arc<ServerGuard>> {
        self.inner.guard.get()
    }

    /// Sets the tool-call and reasoning parsers; later calls are ignored.
    pub fn set_chat_features(&self, features: ChatFeatures) {
        let _ = self.inner.chat_features.set(features);
    }

    pub fn chat_features(&self) -> ChatFeatures {
        self.inner.chat_features.get().copied().unwrap_or_default()
    }

    /// Lists the KV-event publisher's counters on /metrics; later calls are ignored.
    pub fn set_kv_events(&self, stats: Arc<crate::kv_events::KvEventStats>) {
        let _ = self.inner.kv_events.set(stats);
    }

    pub fn kv_events(&self) -> Option<&Arc<crate::kv_events::KvEventStats>> {
        self.inner.kv_events.get()
    }

    /// Defines the SLO classes (and lists them on /metrics); later calls are ignored.
    pub fn set_slo_classes(&self, classes: SloClasses) {
        self.inner.metrics.slo.register(&classes);
        let _ = self.inner.slo_classes.set(Arc::new(classes));
    }

    pub fn slo_classes(&self) -> &SloClasses {
        static NONE: OnceLock<SloClasses> = OnceLock::new();
        match self.inner.slo_classes.get() {
            Some(classes) => classes,
            None => NONE.get_or_init(SloClasses::default),
        }
    }

    pub fn limits(&self) -> &RequestLimits {
        &self.inner.limits
    }

    /// Runs CPU-heavy request work on the blocking pool once a permit is free, keeping the
    /// I/O thread (and with it `/health` and every stream) responsive.
    pub async fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let _permit = self
            .inner
            .blocking
            .acquire()
            .await
            .map_err(|_| ApiError::Unavailable("the server is shutting down"))?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ApiError::Internal(format!("request worker failed: {e}")))?
    }

    pub fn loaded(&self) -> Option<&Loaded> {
        self.inner.loaded.get()
    }

    /// The loaded model, if the server takes new requests.
    pub fn ready(&self) -> Result<&Loaded, ApiError> {
        if self.is_draining() {
            return Err(ApiError::Unavailable("the server is shutting down"));
        }
        self.loaded()
            .ok_or(ApiError::Unavailable("the model is still loading"))
    }

    /// Checks a request's `model` (absent means the served model).
    pub fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            Some(name) if !self.inner.served_model_names.iter().any(|n| n == name) => {
                Err(ApiError::ModelNotFound(name.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// The name responses report.
    pub fn model_name(&self) -> &str {
        &self.inner.served_model_names[0]
    }

    pub fn served_model_names(&self) -> &[String] {
        &self.inner.served_model_names
    }

    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    pub fn created(&self) -> u64 {
        self.inner.created
    }

    pub fn begin_draining(&self) {
        self.inner.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::SeqCst)
    }

    /// Loaded, engine loop alive, not draining.
    pub fn is_healthy(&self) -> bool {
        !self.is_draining() && self.loaded().is_some_and(|l| l.engine.is_alive())
    }
}

/// The chat template: `--chat-template` (a file, or the template itself when no such file
/// exists and it looks like Jinja), else the model directory's or GGUF file's own (possibly none).
pub fn load_chat_template(
    model_dir: &Path,
    override_with: Option<&str>,
) -> Result<Option<ChatTemplate>, ServerError> {
    let gguf = if pagoda_models::loader::is_gguf(model_dir) {
        Some(pagoda_gguf::GgufFile::open(model_dir).map_err(pagoda_runtime::RuntimeError::from)?)
    } else {
        None
    };
    let Some(spec) = override_with else {
        return Ok(match &gguf {
            Some(file) => ChatTemplate::from_gguf(file)?,
            None => ChatTemplate::from_model_dir(model_dir)?,
        });
    };
    let (bos, eos) = match &gguf {
        Some(file) => {
            let tokens = pagoda_text::gguf::special_tokens(file)?;
            (tokens.bos.map(|t| t.text), tokens.eos.map(|t| t.text))
        }
        None => special_tokens(model_dir),
    };
    let path = Path::new(spec);
    if !path.exists() && (spec.contains("{{") || spec.contains("{%")) {
        return Ok(Some(ChatTemplate::from_source(spec.to_string(), bos, eos)?));
    }
    Ok(Some(ChatTemplate::from_file(path, bos, eos)?))
}

/// bos/eos of `tokenizer_config.json`, as a string or an `{"content": ...}` object.
fn special_tokens(model_dir: &Path) -> (Option<String>, Option<String>) {
    let config = std::fs::read_to_string(model_dir.join("tokenizer_config.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .unwrap_or_default();
    let token = |key: &str| match config.get(key) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(obj) => obj
            .get("content")
            .and_then(|c| c.as_str())
            .map(str::to_string),
        None => None,
    };
    (token("bos_token"), token("eos_token"))
}
