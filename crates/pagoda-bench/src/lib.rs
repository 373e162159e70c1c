//! Load generator and capacity planner for OpenAI-compatible LLM endpoints.
//!
//! `pagoda bench serve` streams requests at a given load and reports latencies and
//! throughput, `pagoda bench profile` measures what one replica sustains (or, given latency
//! SLOs, the highest request rate that meets them), `pagoda bench
//! compare` puts two runs side by side and `pagoda plan` sizes a deployment. None of it
//! needs an engine: any server speaking the OpenAI streaming API will do.
//!
//! The `run_*` functions are the command entry points; they are synchronous and build
//! their own tokio runtime. The `pagoda` binary wires them as `pagoda bench serve|profile|compare` and `pagoda plan`.

pub mod arrivals;
pub mod cli;
pub mod client;
pub mod compare;
pub mod error;
pub mod goodput_profile;
pub mod goodput_search;
pub mod json_file;
pub mod metrics;
pub mod mock_server;
pub mod plan;
pub mod plan_command;
pub mod plan_report;
pub mod plot;
pub mod profile;
pub mod profile_format;
pub mod record;
pub mod report;
pub mod runner;
pub mod serve;
pub mod session;
pub mod sse;
pub mod token_count;
pub mod workload;

pub use error::BenchError;
pub use report::{BenchReport, RunReport};

/// `pagoda bench serve`. Fails if every measured request failed, after writing the results.
pub fn run_serve(args: cli::ServeArgs) -> Result<(), BenchError> {
    let report = serve::serve(args)?;
    let sent: u64 = report.runs.iter().map(|r| r.requests).sum();
    let failed: u64 = report.runs.iter().map(|r| r.failed).sum();
    if sent > 0 && failed == sent {
        let first_error = report
            .runs
            .iter()
            .flat_map(|r| r.error_examples.values())
            .next()
            .cloned()
            .unwrap_or_default();
        return Err(BenchError::AllRequestsFailed {
            sent,
            failed,
            first_error,
        });
    }
    Ok(())
}

/// `pagoda bench profile`: the profile for `pagoda plan`, or with both SLO flags the
/// goodput search.
pub fn run_profile(args: cli::ProfileArgs) -> Result<(), BenchError> {
    match goodput_search::SearchConfig::from_args(&args)? {
        Some(config) => goodput_profile::run(&args, &config).map(|_| ()),
        None => profile::profile(args).map(|_| ()),
    }
}

/// `pagoda bench compare A.json B.json`.
pub fn run_compare(args: cli::CompareArgs) -> Result<(), BenchError> {
    let a = BenchReport::read(&args.a)?;
    let b = BenchReport::read(&args.b)?;
    print!(
        "{}",
        compare::format_comparison(
            &a,
            &b,
            &args.a.display().to_string(),
            &args.b.display().to_string()
        )
    );
    Ok(())
}

/// `pagoda plan`.
pub fn run_plan(args: cli::PlanArgs) -> Result<(), BenchError> {
    plan_command::run(&args).map(|_| ())
}
