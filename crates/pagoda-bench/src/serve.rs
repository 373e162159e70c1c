//! `pagoda bench serve`: run each load level, then print, save and plot the figures.

use crate::arrivals::Load;
use crate::cli::{ServeArgs, WorkloadKind};
use crate::error::BenchError;
use crate::plot::{self, CdfSeries};
use crate::record::RequestLine;
use crate::report::{sweep_table, BenchReport, LatencySamples, RunReport, Slo};
use crate::runner::{RunSpec, StopAfter};
use crate::session::{self, LevelPlan};
use crate::token_count::TokenCounter;
use crate::workload::{
    MultiTurnWorkload, RandomWorkload, ShareGptWorkload, SharedPrefixWorkload, Workload,
};
use std::io::IsTerminal;
use std::time::Duration;

/// Runs the benchmark described by `args` and returns what was written to the JSON file.
pub fn serve(args: ServeArgs) -> Result<BenchReport, BenchError> {
    let loads = loads(&args);
    session::check_loads(&loads)?;
    let stop = stop_after(&args)?;
    let tokenizer = session::load_tokenizer(&args.endpoint)?;
    let workload = build_workload(&args, tokenizer.as_ref())?;
    let client = session::client(&args.endpoint)?;
    let context = session::context(client, workload, tokenizer);
    let slo = Slo {
        ttft_ms: args.slo_ttft_ms,
        tpot_ms: args.slo_tpot_ms,
    };
    let show_progress = !args.endpoint.no_progress && std::io::stderr().is_terminal();

    let runtime = session::runtime()?;
    let mut runs = Vec::new();
    let mut samples = Vec::new();
    let mut request_lines = Vec::new();
    for (index, load) in loads.iter().enumerate() {
        let plan = LevelPlan {
            spec: RunSpec {
                load: *load,
                stop,
                max_concurrency: args.max_concurrency,
                seed: args.seed.wrapping_add(index as u64),
            },
            warmup: args.warmup,
            skip_first: 0,
            show_progress,
        };
        let records = runtime.block_on(session::run_level(&context, plan));
        let report = RunReport::from_records(*load, &records, slo);
        println!("{}", report.to_table());
        samples.push(LatencySamples::of(&records.records));
        let level = load.to_string();
        request_lines.extend(records.records.iter().map(|r| RequestLine::of(&level, r)));
        runs.push(report);
    }
    if runs.len() > 1 {
        println!("{}", sweep_table(&runs));
    }

    let report = BenchReport {
        tool: format!("pagoda-bench {}", env!("CARGO_PKG_VERSION")),
        base_url: args.endpoint.base_url.clone(),
        model: args.endpoint.model.clone(),
        endpoint: format!("{:?}", args.endpoint.endpoint).to_lowercase(),
        workload: describe_workload(&args),
        runs,
    };
    write_outputs(&args, &report, &samples, &request_lines)?;
    Ok(report)
}

fn loads(args: &ServeArgs) -> Vec<Load> {
    if !args.request_rate.is_empty() {
        args.request_rate
            .iter()
            .map(|&r| Load::PoissonRate(r))
            .collect()
    } else if !args.concurrency.is_empty() {
        args.concurrency
            .iter()
            .map(|&c| Load::Concurrency(c))
            .collect()
    } else {
        vec![Load::Concurrency(8)]
    }
}

fn stop_after(args: &ServeArgs) -> Result<StopAfter, BenchError> {
    match args.duration_s {
        Some(s) if s > 0.0 && s.is_finite() => Ok(StopAfter::Duration(Duration::from_secs_f64(s))),
        Some(s) => Err(BenchError::InvalidArgument(format!(
            "--duration-s must be a positive number, got {s}"
        ))),
        None if args.num_requests == 0 => Err(BenchError::InvalidArgument(
            "--num-requests must be at least 1".into(),
        )),
        None => Ok(StopAfter::Requests(args.num_requests)),
    }
}

fn build_workload(
    args: &ServeArgs,
    tokenizer: Option<&TokenCounter>,
) -> Result<Box<dyn Workload>, BenchError> {
    Ok(match args.workload {
        WorkloadKind::Random => Box::new(RandomWorkload::new(
            args.input_len,
            args.output_len,
            args.seed,
        )),
        WorkloadKind::SharedPrefix => {
            if !(0.0..=1.0).contains(&args.prefix_fraction) || args.num_prefixes == 0 {
                return Err(BenchError::InvalidArgument(
                    "--prefix-fraction must be in [0, 1] and --num-prefixes at least 1".into(),
                ));
            }
            Box::new(SharedPrefixWorkload::new(
                args.input_len,
                args.output_len,
                args.prefix_fraction,
                args.num_prefixes,
                args.seed,
            ))
        }
        WorkloadKind::MultiTurn => Box::new(MultiTurnWorkload::new(
            args.turns,
            args.input_len,
            args.output_len,
            args.seed,
        )),
        WorkloadKind::Sharegpt => {
            let path = args.dataset.as_deref().ok_or_else(|| {
                BenchError::InvalidArgument("--workload sharegpt needs --dataset PATH".into())
            })?;
            Box::new(ShareGptWorkload::load(path, tokenizer, args.seed)?)
        }
    })
}

fn describe_workload(args: &ServeArgs) -> String {
    let lengths = format!("input {} output {}", args.input_len, args.output_len);
    match args.workload {
        WorkloadKind::Random => format!("random, {lengths}"),
        WorkloadKind::SharedPrefix => format!(
            "shared-prefix ({} prompts, {:.0}% shared), {lengths}",
            args.num_prefixes,
            args.prefix_fraction * 100.0
        ),
        WorkloadKind::MultiTurn => format!("multi-turn ({} turns), {lengths}", args.turns),
        WorkloadKind::Sharegpt => format!(
            "sharegpt {}",
            args.dataset
                .as_deref()
                .unwrap_or(std::path::Path::new("?"))
                .display()
        ),
    }
}

fn write_outputs(
    args: &ServeArgs,
    report: &BenchReport,
    samples: &[LatencySamples],
    request_lines: &[RequestLine],
) -> Result<(), BenchError> {
    std::fs::create_dir_all(&args.out_dir).map_err(|source| BenchError::WriteFile {
        path: args.out_dir.clone(),
        source,
    })?;
    let json_path = args.out_dir.join("bench.json");
    report.write(&json_path)?;
    println!("Results written to {}", json_path.display());
    let lines_path = args.out_dir.join("requests.jsonl");
    let mut text = String::new();
    for line in request_lines {
        text.push_str(&serde_json::to_string(line).expect("a request line serializes"));
        text.push('\n');
    }
    std::fs::write(&lines_path, text).map_err(|source| BenchError::WriteFile {
        path: lines_path.clone(),
        source,
    })?;
    println!("Per-request figures written to {}", lines_path.display());
    if args.no_plots {
        return Ok(());
    }
    let series: Vec<CdfSeries> = report
        .runs
        .iter()
        .zip(samples)
        .map(|(run, samples)| CdfSeries {
            label: run.load.to_string(),
            samples,
        })
        .collect();
    let cdf_path = args.out_dir.join("latency_cdf.svg");
    plot::write_latency_cdfs(&cdf_path, &series)?;
    println!("Latency CDFs drawn in {}", cdf_path.display());
    if report.runs.len() > 1 {
        let x_label = match report.runs[0].load {
            Load::Concurrency(_) => "concurrency",
            Load::PoissonRate(_) => "request rate (req/s)",
        };
        let sweep_path = args.out_dir.join("sweep.svg");
        plot::write_sweep(&sweep_path, &report.runs, x_label)?;
        println!("Sweep drawn in {}", sweep_path.display());
    }
    Ok(())
}
