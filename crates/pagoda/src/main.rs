//! `pagoda`: serve, generate, bench, plan, audit, redteam.

mod commands;
mod model_args;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pagoda",
    version,
    about = "Pagoda: serve open-weight LLMs, measure them, plan capacity"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the model over an OpenAI-compatible HTTP API (with Prometheus metrics).
    // Boxed: the serve flags are many times the size of every other command's.
    Serve(Box<pagoda_server::ServeArgs>),
    /// Complete one prompt and print the result.
    Generate(commands::generate::GenerateArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// API keys of the gateway: create, list, revoke.
    #[command(subcommand)]
    Keys(commands::keys::KeysCommand),
    /// Tokens and cost per tenant, model and hour, from the gateway's metering store.
    Usage(commands::usage::UsageArgs),
    /// Size a deployment (replicas, cost per million tokens) from measured throughput.
    Plan(pagoda_bench::cli::PlanArgs),
    /// Guardrail audit logs.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// Measure how often attacks succeed against an OpenAI-compatible endpoint.
    Redteam(commands::redteam::RedteamArgs),
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check an audit log's hash chain; names the first bad line.
    Verify(commands::audit::VerifyArgs),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Prefill and decode tokens/s of the model runner alone, per batch size.
    Forward(commands::bench_forward::BenchForwardArgs),
    /// The whole engine in process: N concurrent requests; throughput, TTFT, TPOT.
    Engine(commands::bench_engine::BenchEngineArgs),
    /// Drive an OpenAI-compatible endpoint and report latency and throughput.
    Serve(pagoda_bench::cli::ServeArgs),
    /// Find an endpoint's saturated prefill/decode throughput and latencies; write a profile.
    Profile(pagoda_bench::cli::ProfileArgs),
    /// Print two `bench serve` result files side by side with ratios.
    Compare(pagoda_bench::cli::CompareArgs),
}

/// Logs to stderr; `RUST_LOG` overrides the default level (info).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}

/// A forward pass allocates its activations afresh for every layer, up to hundreds of MB for
/// a long prefill. glibc serves blocks that large with `mmap` and returns them with `munmap`,
/// so each layer paid for zeroed pages again (page faults were 3-5% of a 2,048-token
/// prefill). Keeping freed memory in the heap lets the next layer reuse it.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator thresholds; called before any other thread runs.
    unsafe {
        const ONE_GIB: libc::c_int = 1 << 30;
        libc::mallopt(libc::M_MMAP_THRESHOLD, ONE_GIB);
        libc::mallopt(libc::M_TRIM_THRESHOLD, ONE_GIB);
    }
}

fn main() {
    let cli = Cli::parse();
    // A bad PAGODA_KERNELS is an error, not a silent fallback to another kernel path.
    if let Err(message) = pagoda_models::kernels::check_env() {
        eprintln!("error: {message}");
        std::process::exit(1);
    }
    keep_freed_memory();
    let result = match cli.command {
        Command::Serve(args) => {
            init_logging();
            // The server's errors already spell out their causes; `{:#}` would repeat them.
            pagoda_server::run_serve(*args).map_err(|e| anyhow::Error::msg(e.to_string()))
        }
        Command::Generate(args) => commands::generate::run(args),
        Command::Bench(BenchCommand::Forward(args)) => commands::bench_forward::run(args),
        Command::Bench(BenchCommand::Engine(args)) => commands::bench_engine::run(args),
        Command::Bench(BenchCommand::Serve(args)) => {
            pagoda_bench::run_serve(args).map_err(Into::into)
        }
        Command::Bench(BenchCommand::Profile(args)) => {
            pagoda_bench::run_profile(args).map_err(Into::into)
        }
        Command::Bench(BenchCommand::Compare(args)) => {
            pagoda_bench::run_compare(args).map_err(Into::into)
        }
        Command::Keys(command) => commands::keys::run(command),
        Command::Usage(args) => commands::usage::run(args),
        Command::Plan(args) => pagoda_bench::run_plan(args).map_err(Into::into),
        Command::Audit(AuditCommand::Verify(args)) => commands::audit::verify(args),
        Command::Redteam(args) => commands::redteam::run(args),
    };
    if let Err(e) = result {
        // One line, the whole chain of causes, non-zero exit.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
