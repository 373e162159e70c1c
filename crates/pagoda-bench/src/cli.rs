//! Command-line arguments of `pagoda bench serve|profile|compare` and `pagoda plan`.

use crate::client::ApiEndpoint;
use crate::workload::LengthSpec;
use rust_decimal::Decimal;
use std::path::PathBuf;

/// Where and how to reach the server under test.
#[derive(Debug, Clone, clap::Args)]
pub struct EndpointArgs {
    /// Server root, e.g. http://127.0.0.1:8000 (a trailing /v1 is accepted).
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub base_url: String,
    /// Model name sent in each request.
    #[arg(long, default_value = "default")]
    pub model: String,
    /// API to call: the plain completions API or the chat API.
    #[arg(long, value_enum, default_value_t = ApiEndpoint::Completions)]
    pub endpoint: ApiEndpoint,
    /// Bearer token, if the server wants one.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Send `ignore_eos` so every reply has exactly `max_tokens` tokens (vLLM extension;
    /// servers that do not know it ignore it).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub ignore_eos: bool,
    /// tokenizer.json of the served model, to count tokens when the server reports no usage.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Give up on a request after this many seconds (counted as a `timeout` failure).
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout_s: f64,
    /// Hide the progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadKind {
    /// Independent random prompts.
    Random,
    /// Each prompt starts with one of K shared system prompts.
    SharedPrefix,
    /// Conversations whose every turn resends the history.
    MultiTurn,
    /// Prompts from a ShareGPT-format JSON file (`--dataset`).
    Sharegpt,
}

/// `pagoda bench serve`: drive an endpoint with a workload and report latencies.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,

    /// What to send.
    #[arg(long, value_enum, default_value_t = WorkloadKind::Random)]
    pub workload: WorkloadKind,
    /// Prompt length in tokens: N, or MIN:MAX drawn uniformly (per turn for multi-turn).
    #[arg(long, default_value = "512")]
    pub input_len: LengthSpec,
    /// Output length in tokens (max_tokens): N or MIN:MAX.
    #[arg(long, default_value = "128")]
    pub output_len: LengthSpec,
    /// shared-prefix: fraction of each prompt that is a shared system prompt.
    #[arg(long, default_value_t = 0.5)]
    pub prefix_fraction: f64,
    /// shared-prefix: number of distinct system prompts.
    #[arg(long, default_value_t = 4)]
    pub num_prefixes: u32,
    /// multi-turn: turns per conversation.
    #[arg(long, default_value_t = 4)]
    pub turns: u32,
    /// sharegpt: path of the ShareGPT-format JSON file.
    #[arg(long)]
    pub dataset: Option<PathBuf>,

    /// Requests kept in flight; a comma-separated list runs a sweep (e.g. 1,4,16,64).
    #[arg(long, value_delimiter = ',', conflicts_with = "request_rate")]
    pub concurrency: Vec<u32>,
    /// Poisson arrival rate in requests/s; a comma-separated list runs a sweep.
    #[arg(long, value_delimiter = ',')]
    pub request_rate: Vec<f64>,
    /// With --request-rate, cap the requests in flight.
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// Measured requests per load level.
    #[arg(long, default_value_t = 200)]
    pub num_requests: u64,
    /// Send for this many seconds per load level instead of a request count.
    #[arg(long, conflicts_with = "num_requests")]
    pub duration_s: Option<f64>,
    /// Requests sent before each load level and left out of its figures.
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Seed of prompts, lengths and arrivals.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,

    /// Goodput counts requests whose TTFT is at most this.
    #[arg(long)]
    pub slo_ttft_ms: Option<f64>,
    /// Goodput counts requests whose time per output token is at most this.
    #[arg(long)]
    pub slo_tpot_ms: Option<f64>,

    /// Folder for the JSON results and SVG plots.
    #[arg(long, default_value = "bench-results")]
    pub out_dir: PathBuf,
    /// Skip the SVG plots.
    #[arg(long)]
    pub no_plots: bool,
}

/// `pagoda bench profile`: measure a deployment's saturated throughput and its
/// latencies at several loads, for `pagoda plan`; with `--slo-ttft-ms` and `--slo-itl-ms`,
/// search instead for the highest Poisson request rate that meets both.
#[derive(Debug, Clone, clap::Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub endpoint: EndpointArgs,
    /// Loads at which to measure TTFT and ITL of the mixed workload.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub concurrency: Vec<u32>,
    /// Prompt and output lengths of the mixed workload.
    #[arg(long, default_value_t = 512)]
    pub input_len: u32,
    #[arg(long, default_value_t = 128)]
    pub output_len: u32,
    /// Requests in flight when measuring saturated throughput.
    #[arg(long, default_value_t = 64)]
    pub saturation_concurrency: u32,
    /// Prompt length of the prefill measurement (outputs are one token).
    #[arg(long, default_value_t = 2048)]
    pub prefill_input_len: u32,
    /// Output length of the decode measurement (prompts are short).
    #[arg(long, default_value_t = 256)]
    pub decode_output_len: u32,
    /// Measured requests per step.
    #[arg(long, default_value_t = 128)]
    pub num_requests: u64,
    /// Requests sent before each step, waited for, and left out.
    #[arg(long, default_value_t = 4)]
    pub warmup: u64,
    /// Requests at the start of each step (each rate of the goodput search) that are sent
    /// but left out; unlike --warmup they are not waited for, so the measured requests meet
    /// the backlog the step has built up.
    #[arg(long, default_value_t = 0)]
    pub warmup_requests: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to write the profile JSON.
    #[arg(long, default_value = "profile.json")]
    pub output: PathBuf,

    /// Goodput search: a request meets the SLO if its TTFT is at most this. Needs
    /// --slo-itl-ms; together they replace profiling with the rate search.
    #[arg(long)]
    pub slo_ttft_ms: Option<f64>,
    /// Goodput search: a request meets the SLO if its time per output token is at most this.
    #[arg(long)]
    pub slo_itl_ms: Option<f64>,
    /// Goodput search: fraction of measured requests that must meet the SLO [default: 0.9].
    #[arg(long)]
    pub slo_attainment: Option<f64>,
    /// Goodput search: lowest request rate (req/s) to try [default: 1].
    #[arg(long)]
    pub rate_min: Option<f64>,
    /// Goodput search: highest request rate to try; without it the rate is doubled from
    /// --rate-min until the SLO is missed.
    #[arg(long)]
    pub rate_max: Option<f64>,
    /// Goodput search: bisection steps between the last rate met and the first missed
    /// [default: 5, at most 20].
    #[arg(long)]
    pub search_steps: Option<u32>,
    /// Goodput search: folder for the JSON results and SVG plot.
    #[arg(long, default_value = "bench-results")]
    pub out_dir: PathBuf,
    /// Goodput search: skip the SVG plot.
    #[arg(long)]
    pub no_plots: bool,
}

/// `pagoda bench compare A.json B.json`: two runs side by side with ratios B/A.
#[derive(Debug, Clone, clap::Args)]
pub struct CompareArgs {
    pub a: PathBuf,
    pub b: PathBuf,
}

/// `pagoda plan`: replicas and cost for a target load.
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Profile JSON from `pagoda bench profile`.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Saturated prefill tokens/s per replica (overrides the profile).
    #[arg(long)]
    pub prefill_tps: Option<Decimal>,
    /// Saturated decode tokens/s per replica (overrides the profile).
    #[arg(long)]
    pub decode_tps: Option<Decimal>,
    /// Requests per second to serve.
    #[arg(long)]
    pub qps: Decimal,
    /// Mean input tokens per request.
    #[arg(long)]
    pub input: Decimal,
    /// Mean output tokens per request.
    #[arg(long)]
    pub output: Decimal,
    /// Fraction of input tokens served from the prefix cache.
    #[arg(long, default_value = "0")]
    pub cache_hit: Decimal,
    /// TTFT target, checked against the profile's measured loads.
    #[arg(long)]
    pub slo_ttft_ms: Option<f64>,
    /// Inter-token latency target, checked against the profile's measured loads.
    #[arg(long)]
    pub slo_itl_ms: Option<f64>,
    /// Measured percentile that must meet the targets: 50, 90 or 99.
    #[arg(long, default_value_t = 90)]
    pub slo_percentile: u8,
    /// Multiplier on throughput-based sizes to absorb bursts and tail latency.
    #[arg(long, default_value = "1.8")]
    pub headroom: Decimal,
    /// Accelerators per replica (tensor/pipeline parallel size).
    #[arg(long, default_value_t = 1)]
    pub accelerators_per_replica: u64,
    /// Price of one accelerator-hour in US dollars.
    #[arg(long, default_value = "2.0")]
    pub accelerator_hour_usd: Decimal,
    /// Print the plan as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the plan with its inputs as JSON to this file (what the operator console
    /// shows).
    #[arg(long)]
    pub out: Option<PathBuf>,
}
