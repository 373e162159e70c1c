//! The router, the serve loop with its drain on shutdown, and `pagoda serve`'s entry point.
//! The connections themselves (deadlines, cap) are `http.rs`'s.

use std::future::Future;
use std::time::Duration;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use tokio::net::TcpListener;

use pagoda_gateway::AuditAnchors;

use crate::args::ServeArgs;
use crate::audit_anchor::Anchoring;
use crate::console;
use crate::error::ServerError;
use crate::gateway;
use crate::guard;
use crate::http::{Connections, HttpLimits};
use crate::kv_events;
use crate::routes::{self, chat, completions, models, ops, render, tokenize};
use crate::settings::Settings;
use crate::state::{load_chat_template, AppState, Loaded};

/// How often the audit log's head is anchored in the gateway database (and once at exit).
const ANCHOR_EVERY: Duration = Duration::from_secs(30);

/// Loads the guardrail policy and puts every request behind it (no settings: no screening).
pub fn start_guard(
    state: &AppState,
    settings: Option<&guard::GuardSettings>,
) -> Result<(), ServerError> {
    if let Some(settings) = settings {
        state.set_guard(guard::open(settings)?);
    }
    Ok(())
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat::handle))
        .route("/v1/completions", post(completions::handle))
        .route("/v1/chat/completions/render", post(render::chat))
        .route("/v1/completions/render", post(render::completions))
        .route("/v1/models", get(models::list))
        .route("/v1/models/{*model}", get(models::retrieve))
        .route("/tokenize", post(tokenize::tokenize))
        .route("/detokenize", post(tokenize::detokenize))
        .route("/health", get(ops::health))
        .route("/metrics", get(ops::metrics))
        .route("/version", get(ops::version))
        .route("/v1/usage", get(gateway::usage))
        .merge(console::routes())
        .fallback(ops::not_found)
        .layer(from_fn_with_state(state.clone(), gateway::authenticate))
        .layer(axum::extract::DefaultBodyLimit::max(
            state.limits().max_body_bytes,
        ))
        .layer(from_fn_with_state(state.clone(), routes::refuse_oversized))
        .with_state(state)
}

/// Serves with the default `HttpLimits`; see `serve_with`.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain_timeout: Duration,
) -> std::io::Result<()> {
    serve_with(
        listener,
        state,
        HttpLimits::default(),
        shutdown,
        drain_timeout,
    )
    .await
}

/// Serves until `shutdown` resolves, each connection under the deadlines of `http` and at most
/// `http.max_connections` at once (see `http.rs`); then stops admission (new requests and
/// `/health` get 503, the listener closes, idle connections close) and waits up to
/// `drain_timeout` for in-flight requests. Requests still running after that are dropped,
/// which aborts them.
pub async fn serve_with(
    listener: TcpListener,
    state: AppState,
    http: HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    drain_timeout: Duration,
) -> std::io::Result<()> {
    if state.gateway().is_some() {
        console::spawn_sampler(state.clone());
    }
    let mut connections = Connections::new(router(state.clone()), http);
    connections.accept(&listener, shutdown).await;
    tracing::info!("shutting down: admission stopped, draining in-flight requests");
    state.begin_draining();
    drop(listener);
    connections.drain(drain_timeout).await;
    Ok(())
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

/// `pagoda serve`: listens at once (`/health` answers 503 while the model loads), loads the
/// model, serves until SIGTERM or Ctrl-C, drains, stops the engine and returns `Ok`.
pub fn run_serve(args: ServeArgs) -> Result<(), ServerError> {
    let settings = Settings::resolve(args)?;
    // One I/O thread: HTTP work per token is tiny next to the CPU engine, and every extra
    // busy thread steals time slices from the engine's kernel threads, which wait for each
    // other at every matmul.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let result = runtime.block_on(run(settings));
    // Connections still open after the drain timeout are dropped here, which aborts their
    // requests; a model load interrupted by a signal is not waited for.
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn run(mut settings: Settings) -> Result<(), ServerError> {
    let addr = settings.bind_address()?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: addr.to_string(),
            source,
        })?;
    tracing::info!(address = %listener.local_addr()?, model = %settings.model, "listening; loading the model");
    let state = AppState::with_limits(settings.served_model_names.clone(), settings.limits.clone());
    state.metrics().set_vllm_compat(settings.vllm_metrics);
    state.set_chat_features(settings.chat_features);
    state.set_slo_classes(settings.slo_classes.clone());
    gateway::start(&state, settings.gateway.clone()).await?;
    start_guard(&state, settings.guard.as_ref())?;
    if let Some(kv_events) = &settings.kv_events {
        let publisher = kv_events::start(kv_events, settings.engine.block_size).await?;
        state.set_kv_events(publisher.stats.clone());
        settings.engine.kv_events = Some(publisher.sink);
    }
    if let Some(dir) = &settings.console_reports_dir {
        if !dir.is_dir() {
            // Not fatal: the console says so, and the folder may be made later.
            tracing::warn!(dir = %dir.display(), "--console-reports-dir is not a folder (yet)");
        }
        state.set_console_reports_dir(dir.clone());
    }
    let anchoring = match (state.guard(), &settings.gateway) {
        (Some(guard), Some(gateway)) if guard.audit_head().is_some() => {
            let anchoring = Anchoring::new(AuditAnchors::open(&gateway.db)?, guard.clone());
            let task = anchoring.spawn(ANCHOR_EVERY);
            Some((anchoring, task))
        }
        _ => None,
    };
    let mut server = tokio::spawn(serve_with(
        listener,
        state.clone(),
        settings.http,
        shutdown_signal(),
        settings.drain_timeout,
    ));
    let load = tokio::task::spawn_blocking(move || load(&settings));
    tokio::select! {
        loaded = load => {
            let loaded = loaded.map_err(|e| std::io::Error::other(e.to_string()))??;
            tracing::info!("model loaded; ready");
            state.set_loaded(loaded);
        }
        result = &mut server => {
            // Shut down before the model finished loading.
            return Ok(result.map_err(|e| std::io::Error::other(e.to_string()))??);
        }
    }
    let result = server
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    if let Some(loaded) = state.loaded() {
        loaded.engine.shutdown();
        let left = loaded.engine.num_in_flight();
        if left == 0 {
            let engine = loaded.engine.clone();
            let join = tokio::task::spawn_blocking(move || engine.join());
            if tokio::time::timeout(Duration::from_secs(10), join)
                .await
                .is_err()
            {
                tracing::warn!("the engine did not stop within 10s");
            }
        } else {
            tracing::warn!(
                sequences = left,
                "drain timeout passed; aborting what is left"
            );
        }
    }
    gateway::stop(&state).await;
    if let Some((anchoring, task)) = anchoring {
        task.abort();
        anchoring.anchor();
    }
    tracing::info!("stopped");
    Ok(result?)
}

fn load(settings: &Settings) -> Result<Loaded, ServerError> {
    // A hub id is downloaded here, after the port is bound, so /health says 503 meanwhile.
    let mut engine_config = settings.engine.clone();
    let spec = engine_config.model_dir.to_string_lossy().into_owned();
    let with_weights = engine_config.load.format == pagoda_models::LoadFormat::Safetensors;
    engine_config.model_dir = pagoda_runtime::resolve_model(&spec, with_weights)?;
    let chat_template =
        load_chat_template(&engine_config.model_dir, settings.chat_template.as_deref())?;
    if chat_template.is_none() {
        tracing::warn!("the model has no chat template; /v1/chat/completions will refuse requests");
    }
    let engine = pagoda_runtime::start(engine_config)?;
    tracing::info!(
        model = %engine.info().model_dir.display(),
        weights = %engine.info().weight_types,
        kv_blocks = engine.info().kv_cache.num_blocks,
        kv_bytes = engine.info().kv_cache_bytes,
        "model loaded"
    );
    Ok(Loaded {
        engine,
        chat_template,
    })
}
