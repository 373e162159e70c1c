//! Pieces shared by `bench serve` and `bench profile`: runtime, client, and one measured
//! load level with its warm-up and progress bar.

use crate::arrivals::Load;
use crate::cli::EndpointArgs;
use crate::client::{ClientConfig, StreamingClient};
use crate::error::BenchError;
use crate::runner::{self, RunContext, RunRecords, RunSpec, StopAfter};
use crate::token_count::TokenCounter;
use crate::workload::Workload;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub fn runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(BenchError::Runtime)
}

pub fn load_tokenizer(args: &EndpointArgs) -> Result<Option<TokenCounter>, BenchError> {
    args.tokenizer
        .as_deref()
        .map(TokenCounter::from_file)
        .transpose()
}

pub fn client(args: &EndpointArgs) -> Result<StreamingClient, BenchError> {
    if !(args.request_timeout_s > 0.0 && args.request_timeout_s.is_finite()) {
        return Err(BenchError::InvalidArgument(
            "--request-timeout-s must be a positive number".into(),
        ));
    }
    StreamingClient::new(ClientConfig {
        base_url: args.base_url.clone(),
        model: args.model.clone(),
        endpoint: args.endpoint,
        ignore_eos: args.ignore_eos,
        api_key: args.api_key.clone(),
        request_timeout: Duration::from_secs_f64(args.request_timeout_s),
    })
}

pub fn context(
    client: StreamingClient,
    workload: Box<dyn Workload>,
    tokenizer: Option<TokenCounter>,
) -> Arc<RunContext> {
    Arc::new(RunContext {
        client,
        workload: Mutex::new(workload),
        tokenizer,
    })
}

/// How one load level is run.
#[derive(Debug, Clone, Copy)]
pub struct LevelPlan {
    pub spec: RunSpec,
    /// Requests sent and waited for before the level starts: they warm connections and
    /// caches, and the level then starts on an idle server.
    pub warmup: u64,
    /// Requests at the start of the level itself that are sent but left out of its records,
    /// so that the measured ones meet the backlog a steady stream has built up. With a
    /// request count, `spec.stop` counts the measured requests only.
    pub skip_first: u64,
    pub show_progress: bool,
}

/// Sends the warm-up requests (waiting for all of them), then the level, whose first
/// `skip_first` requests are left out.
pub async fn run_level(context: &Arc<RunContext>, plan: LevelPlan) -> RunRecords {
    if plan.warmup > 0 {
        let warmup = RunSpec {
            stop: StopAfter::Requests(plan.warmup),
            ..plan.spec
        };
        let bar = plan
            .show_progress
            .then(|| progress_bar(Some(plan.warmup), &format!("warm-up {}", plan.spec.load)));
        runner::run(context.clone(), warmup, bar.clone()).await;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
    }
    let spec = match plan.spec.stop {
        StopAfter::Requests(n) => RunSpec {
            stop: StopAfter::Requests(n.saturating_add(plan.skip_first)),
            ..plan.spec
        },
        StopAfter::Duration(_) => plan.spec,
    };
    let total = match spec.stop {
        StopAfter::Requests(n) => Some(n),
        StopAfter::Duration(_) => None,
    };
    let bar = plan
        .show_progress
        .then(|| progress_bar(total, &plan.spec.load.to_string()));
    let records = runner::run(context.clone(), spec, bar.clone()).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    records.without_first(plan.skip_first)
}

fn progress_bar(total: Option<u64>, label: &str) -> ProgressBar {
    let (bar, template) = match total {
        Some(n) => (
            ProgressBar::new(n),
            "{prefix:>28} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec})",
        ),
        None => (
            ProgressBar::no_length(),
            "{prefix:>28} [{elapsed_precise}] {pos} requests ({per_sec})",
        ),
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.set_prefix(label.to_owned());
    bar
}

/// Rejects loads the runner cannot honour.
pub fn check_loads(loads: &[Load]) -> Result<(), BenchError> {
    for load in loads {
        match *load {
            Load::Concurrency(0) => {
                return Err(BenchError::InvalidArgument(
                    "--concurrency must be at least 1".into(),
                ))
            }
            Load::PoissonRate(rate) if !(rate > 0.0 && rate.is_finite()) => {
                return Err(BenchError::InvalidArgument(format!(
                    "--request-rate must be a positive number, got {rate}"
                )))
            }
            _ => {}
        }
    }
    Ok(())
}
