//! `pagoda bench profile`: saturated prefill and decode throughput, and latencies of a mixed
//! workload at several loads, written as the profile `pagoda plan` reads.

use crate::arrivals::Load;
use crate::cli::ProfileArgs;
use crate::error::BenchError;
use crate::goodput_search::SearchConfig;
use crate::profile_format::{Profile, ProfileLoad};
use crate::report::{RunReport, Slo};
use crate::runner::{RunContext, RunSpec, StopAfter};
use crate::session::{self, LevelPlan};
use crate::workload::{LengthSpec, RandomWorkload};
use std::io::IsTerminal;
use std::sync::Arc;

/// Prompt length of the decode measurement: short, so prefill barely counts.
const DECODE_PROMPT_TOKENS: u32 = 16;

pub fn profile(args: ProfileArgs) -> Result<Profile, BenchError> {
    if SearchConfig::from_args(&args)?.is_some() {
        return Err(BenchError::InvalidArgument(
            "--slo-ttft-ms and --slo-itl-ms ask for the goodput search, not the profile".into(),
        ));
    }
    let loads: Vec<Load> = args
        .concurrency
        .iter()
        .map(|&c| Load::Concurrency(c))
        .collect();
    session::check_loads(&loads)?;
    session::check_loads(&[Load::Concurrency(args.saturation_concurrency)])?;
    if args.num_requests == 0 {
        return Err(BenchError::InvalidArgument(
            "--num-requests must be at least 1".into(),
        ));
    }
    let runtime = session::runtime()?;
    let show_progress = !args.endpoint.no_progress && std::io::stderr().is_terminal();
    let step =
        |input: u32, output: u32, load: Load, seed_offset: u64| -> Result<RunReport, BenchError> {
            let workload = RandomWorkload::new(
                LengthSpec::fixed(input),
                LengthSpec::fixed(output),
                args.seed.wrapping_add(seed_offset),
            );
            let context: Arc<RunContext> = session::context(
                session::client(&args.endpoint)?,
                Box::new(workload),
                session::load_tokenizer(&args.endpoint)?,
            );
            let plan = LevelPlan {
                spec: RunSpec {
                    load,
                    stop: StopAfter::Requests(args.num_requests),
                    max_concurrency: None,
                    seed: args.seed,
                },
                warmup: args.warmup,
                skip_first: args.warmup_requests,
                show_progress,
            };
            let records = runtime.block_on(session::run_level(&context, plan));
            let report = RunReport::from_records(load, &records, Slo::default());
            if report.completed == 0 {
                return Err(BenchError::AllRequestsFailed {
                    sent: report.requests,
                    failed: report.failed,
                    first_error: report
                        .error_examples
                        .values()
                        .next()
                        .cloned()
                        .unwrap_or_default(),
                });
            }
            Ok(report)
        };

    let saturation = Load::Concurrency(args.saturation_concurrency);
    println!(
        "Measuring saturated prefill ({} prompt tokens, 1 output token, {saturation})",
        args.prefill_input_len
    );
    let prefill = step(args.prefill_input_len, 1, saturation, 1)?;
    println!(
        "  prefill: {:.0} prompt tokens/s",
        prefill.input_token_throughput
    );
    println!(
        "Measuring saturated decode ({} output tokens, {saturation})",
        args.decode_output_len
    );
    let decode = step(DECODE_PROMPT_TOKENS, args.decode_output_len, saturation, 2)?;
    println!(
        "  decode: {:.0} output tokens/s",
        decode.output_token_throughput
    );

    let mut measured = Vec::new();
    for (i, load) in loads.iter().enumerate() {
        let report = step(args.input_len, args.output_len, *load, 10 + i as u64)?;
        println!(
            "  {load}: {:.2} req/s, TTFT p50/p90/p99 {:.1}/{:.1}/{:.1} ms, ITL p50/p90/p99 {:.2}/{:.2}/{:.2} ms",
            report.request_throughput,
            report.ttft_ms.median,
            report.ttft_ms.p90,
            report.ttft_ms.p99,
            report.itl_ms.median,
            report.itl_ms.p90,
            report.itl_ms.p99
        );
        measured.push(ProfileLoad {
            concurrency: args.concurrency[i],
            request_throughput: report.request_throughput,
            input_token_throughput: report.input_token_throughput,
            output_token_throughput: report.output_token_throughput,
            failed: report.failed,
            ttft_ms: report.ttft_ms,
            itl_ms: report.itl_ms,
            tpot_ms: report.tpot_ms,
        });
    }
    let profile = Profile {
        tool: format!("pagoda-bench {}", env!("CARGO_PKG_VERSION")),
        base_url: args.endpoint.base_url.clone(),
        model: args.endpoint.model.clone(),
        prefill_tps: prefill.input_token_throughput,
        decode_tps: decode.output_token_throughput,
        input_len: args.input_len,
        output_len: args.output_len,
        loads: measured,
    };
    profile.write(&args.output)?;
    println!("Profile written to {}", args.output.display());
    Ok(profile)
}
