//! `pagoda bench profile --slo-ttft-ms X --slo-itl-ms Y`: measures the random workload at the
//! Poisson rates [`goodput_search`] picks, then prints, saves and plots every rate measured
//! and the highest rate that met the SLO.

use crate::arrivals::Load;
use crate::cli::ProfileArgs;
use crate::error::{percent, BenchError};
use crate::goodput_search::{self, RatePoint, Search, SearchConfig};
use crate::plot;
use crate::report::{RunReport, Slo};
use crate::runner::{RunSpec, StopAfter};
use crate::session::{self, LevelPlan};
use crate::workload::{LengthSpec, RandomWorkload};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// What the search found, as written to `goodput_search.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputSearchReport {
    pub tool: String,
    pub base_url: String,
    pub model: String,
    pub input_len: u32,
    pub output_len: u32,
    /// Measured requests per rate, after `warmup` sent before and `warmup_requests` left
    /// out at the start.
    pub num_requests: u64,
    pub warmup: u64,
    pub warmup_requests: u64,
    pub seed: u64,
    pub search: SearchConfig,
    /// Every rate measured, in increasing rate.
    pub points: Vec<RatePoint<RunReport>>,
    pub answer: GoodputAnswer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputAnswer {
    /// The highest rate measured to meet the SLO below the lowest rate that missed it.
    pub max_rate: f64,
    /// Goodput (requests/s meeting the SLO) measured at `max_rate`.
    pub goodput: f64,
    pub attainment: f64,
    /// The lowest rate above `max_rate` that missed the SLO; `None` when none did, so
    /// `max_rate` is only a lower bound.
    pub lowest_missed_rate: Option<f64>,
}

/// Runs the search, prints the table and answer, and writes the JSON and plot; fails with
/// [`BenchError::GoodputUnreachable`] when even `--rate-min` misses the SLO.
pub fn run(args: &ProfileArgs, config: &SearchConfig) -> Result<GoodputSearchReport, BenchError> {
    let runtime = session::runtime()?;
    let show_progress = !args.endpoint.no_progress && std::io::stderr().is_terminal();
    let slo = Slo {
        ttft_ms: Some(config.slo_ttft_ms),
        tpot_ms: Some(config.slo_itl_ms),
    };
    println!(
        "Searching the highest Poisson rate at which {}% of requests meet TTFT <= {} ms and ITL <= {} ms \
         ({} requests of {} prompt / {} output tokens per rate)",
        percent(config.attainment),
        config.slo_ttft_ms,
        config.slo_itl_ms,
        args.num_requests,
        args.input_len,
        args.output_len
    );
    let measure = |rate: f64| -> Result<RunReport, BenchError> {
        let load = Load::PoissonRate(rate);
        // Every rate gets the same arrival pattern (scaled by the rate), so differences between
        // rates come from the rate alone, but prompts of its own: with the same prompts, a
        // server's prefix cache would answer every rate after the first from what it kept.
        let workload = RandomWorkload::new(
            LengthSpec::fixed(args.input_len),
            LengthSpec::fixed(args.output_len),
            prompt_seed(args.seed, rate),
        );
        let context = session::context(
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
        let report = RunReport::from_records(load, &records, slo);
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
        let attainment = report.slo_attainment();
        println!(
            "  {rate:.2} req/s: {:.2} req/s achieved, {}% met the SLO ({}), TTFT p99 {:.1} ms, ITL p99 {:.2} ms",
            report.request_throughput,
            percent(attainment),
            if config.is_met(attainment) { "met" } else { "missed" },
            report.ttft_ms.p99,
            report.tpot_ms.p99
        );
        Ok(report)
    };
    let search = goodput_search::search(config, measure, RunReport::slo_attainment)?;
    let report = build_report(args, config, &search);
    print!("{}", search_table(&report.points));
    println!("{}", answer_lines(config, &report.answer));
    write_outputs(args, &report)?;
    Ok(report)
}

/// The prompts' seed at `rate`: the same for a rate on every run, different between rates.
fn prompt_seed(seed: u64, rate: f64) -> u64 {
    seed ^ rate.to_bits().rotate_left(17)
}

fn build_report(
    args: &ProfileArgs,
    config: &SearchConfig,
    search: &Search<RunReport>,
) -> GoodputSearchReport {
    let best = search.best();
    GoodputSearchReport {
        tool: format!("pagoda-bench {}", env!("CARGO_PKG_VERSION")),
        base_url: args.endpoint.base_url.clone(),
        model: args.endpoint.model.clone(),
        input_len: args.input_len,
        output_len: args.output_len,
        num_requests: args.num_requests,
        warmup: args.warmup,
        warmup_requests: args.warmup_requests,
        seed: args.seed,
        search: *config,
        points: search.by_rate().into_iter().cloned().collect(),
        answer: GoodputAnswer {
            max_rate: best.rate,
            goodput: best.run.goodput,
            attainment: best.attainment,
            lowest_missed_rate: search.first_miss().map(|p| p.rate),
        },
    }
}

/// One line per measured rate. ITL here is per request, its time per output token: the
/// figure the SLO is checked against.
pub fn search_table(points: &[RatePoint<RunReport>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>10}{:>10}{:>12}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}  SLO",
        "rate",
        "req/s",
        "out tok/s",
        "attained",
        "TTFT p50",
        "TTFT p99",
        "ITL p50",
        "ITL p99",
        "goodput"
    );
    for point in points {
        let run = &point.run;
        let _ = writeln!(
            out,
            "{:>10.2}{:>10.2}{:>12.1}{:>9}%{:>10.1}{:>10.1}{:>10.2}{:>10.2}{:>10.2}  {}",
            point.rate,
            run.request_throughput,
            run.output_token_throughput,
            percent(point.attainment),
            run.ttft_ms.median,
            run.ttft_ms.p99,
            run.tpot_ms.median,
            run.tpot_ms.p99,
            run.goodput,
            if point.meets_slo { "met" } else { "missed" }
        );
    }
    let _ = writeln!(
        out,
        "(rates and goodput in req/s, latencies in ms; ITL is each request's time per output token)"
    );
    out
}

/// The answer line, and what bounds it.
pub fn answer_lines(config: &SearchConfig, answer: &GoodputAnswer) -> String {
    let mut out = format!(
        "max rate meeting SLO (>= {}% attained): {:.2} req/s (goodput {:.2} req/s)",
        percent(config.attainment),
        answer.max_rate,
        answer.goodput
    );
    match answer.lowest_missed_rate {
        Some(missed) => {
            let _ = write!(out, "\nlowest rate measured to miss it: {missed:.2} req/s");
        }
        None => {
            let _ = write!(
                out,
                "\nthe SLO was still met at the highest rate tried, so the real maximum is higher; \
                 raise --rate-max to search further"
            );
        }
    }
    out
}

fn write_outputs(args: &ProfileArgs, report: &GoodputSearchReport) -> Result<(), BenchError> {
    let dir: &Path = &args.out_dir;
    std::fs::create_dir_all(dir).map_err(|source| BenchError::WriteFile {
        path: dir.to_owned(),
        source,
    })?;
    let json_path: PathBuf = dir.join("goodput_search.json");
    let text = serde_json::to_string_pretty(report).expect("search reports always serialise");
    std::fs::write(&json_path, text).map_err(|source| BenchError::WriteFile {
        path: json_path.clone(),
        source,
    })?;
    println!("Results written to {}", json_path.display());
    if args.no_plots {
        return Ok(());
    }
    let runs: Vec<RunReport> = report.points.iter().map(|p| p.run.clone()).collect();
    let plot_path = dir.join("goodput_search.svg");
    plot::write_goodput_curves(&plot_path, &runs)?;
    println!("Latency curves drawn in {}", plot_path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::prompt_seed;

    #[test]
    fn each_rate_has_prompts_of_its_own() {
        assert_eq!(prompt_seed(7, 0.25), prompt_seed(7, 0.25));
        assert_ne!(prompt_seed(7, 0.25), prompt_seed(7, 0.5));
        assert_ne!(prompt_seed(7, 0.25), prompt_seed(8, 0.25));
    }
}
