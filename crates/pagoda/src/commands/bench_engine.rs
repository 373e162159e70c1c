//! `pagoda bench engine`: the whole engine in process (scheduler, runner, sampler; no HTTP).
//! N requests arrive together; reports throughput, time to first token, time per output
//! token, and how much of each step the scheduler itself takes.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use pagoda_runtime::{GenerateRequest, KvEventSink, SamplingParams};

use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub struct BenchEngineArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Numbers of concurrent requests to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,64")]
    pub num_requests: Vec<usize>,
    #[arg(long, default_value_t = 128)]
    pub input_len: usize,
    #[arg(long, default_value_t = 128)]
    pub output_len: usize,
    /// Most requests running at once (the rest wait).
    #[arg(long, default_value_t = 64)]
    pub max_num_seqs: usize,
    /// Token budget of one step.
    #[arg(long, default_value_t = 512)]
    pub max_num_batched_tokens: usize,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Log KV-cache events and encode them as `serve --kv-events-endpoint` would (on another
    /// thread, without sending them), reporting the engine thread's share of each step.
    #[arg(long)]
    pub kv_events: bool,
}

pub fn run(args: BenchEngineArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.input_len > 0 && args.output_len > 1,
        "--input-len must be positive and --output-len above 1"
    );
    let mut config = args.model.engine_config()?;
    config.max_num_seqs = args.max_num_seqs;
    config.max_num_batched_tokens = args.max_num_batched_tokens;
    config.max_prefill_chunk = config.max_prefill_chunk.min(args.max_num_batched_tokens);
    config.max_pending_requests = config
        .max_pending_requests
        .max(args.num_requests.iter().copied().max().unwrap_or(1));
    if config.max_model_len.is_none() {
        config.max_model_len = Some(args.input_len + args.output_len);
    }
    let encoder = args.kv_events.then(|| {
        let (sink, mut receiver) = KvEventSink::channel(pagoda_server::kv_events::QUEUE_BATCHES);
        config.kv_events = Some(sink);
        let block_size = config.block_size;
        std::thread::spawn(move || {
            let mut bytes = 0usize;
            while let Some(batch) = receiver.blocking_recv() {
                bytes += pagoda_server::kv_events::encode_batch(&batch, block_size).len();
            }
            bytes
        })
    });
    let engine = pagoda_runtime::start(config).context("cannot start the engine")?;
    let vocab = engine.info().vocab_size as u64;
    if !args.json {
        println!(
            "{:>5} {:>11} {:>9} {:>9} {:>10} {:>10} {:>12}",
            "N", "out tok/s", "ttft p50", "ttft p99", "tpot mean", "tpot p99", "sched/step"
        );
    }
    for (run, &n) in args.num_requests.iter().enumerate() {
        let before = engine.stats();
        let start = Instant::now();
        let streams: Vec<_> = (0..n)
            .map(|i| {
                let prompt = random_prompt(args.input_len, vocab, (run * 100_000 + i) as u64);
                let sampling = SamplingParams {
                    temperature: 0.0,
                    max_tokens: Some(args.output_len),
                    ignore_eos: true,
                    ..SamplingParams::default()
                };
                engine.submit(GenerateRequest::new(prompt, sampling))
            })
            .collect::<Result<_, _>>()?;
        let mut ttft = Vec::new();
        let mut tpot = Vec::new();
        let mut output_tokens = 0usize;
        for mut stream in streams {
            while let Some(out) = stream.blocking_next() {
                if let Some(done) = out.finished {
                    anyhow::ensure!(done.error.is_none(), "request failed: {:?}", done.error);
                    let first = done.timings.first_token.unwrap_or(done.timings.finished);
                    ttft.push(first);
                    let completion = done.usage.completion_tokens;
                    output_tokens += completion;
                    if completion > 1 {
                        tpot.push((done.timings.finished - first) / (completion as u32 - 1));
                    }
                }
            }
        }
        let wall = start.elapsed();
        let after = engine.stats();
        let steps = (after.steps_total - before.steps_total).max(1) as u32;
        let sched = (after.scheduler_time_total - before.scheduler_time_total) / steps;
        let forward = (after.forward_time_total - before.forward_time_total) / steps;
        let kv_events = (after.kv_events_time_total - before.kv_events_time_total) / steps;
        let step_time = (sched + forward + kv_events)
            .as_secs_f64()
            .max(f64::MIN_POSITIVE);
        let sched_share = sched.as_secs_f64() / step_time;
        let kv_events_share = kv_events.as_secs_f64() / step_time;
        let throughput = output_tokens as f64 / wall.as_secs_f64();
        ttft.sort();
        tpot.sort();
        let mean_tpot = tpot.iter().sum::<Duration>() / tpot.len().max(1) as u32;
        if args.json {
            let line = serde_json::json!({
                "num_requests": n, "input_len": args.input_len, "output_len": args.output_len,
                "output_tokens_per_s": throughput,
                "ttft_p50_s": percentile(&ttft, 0.5).as_secs_f64(), "ttft_p99_s": percentile(&ttft, 0.99).as_secs_f64(),
                "tpot_mean_s": mean_tpot.as_secs_f64(), "tpot_p99_s": percentile(&tpot, 0.99).as_secs_f64(),
                "steps": steps, "scheduler_s_per_step": sched.as_secs_f64(), "forward_s_per_step": forward.as_secs_f64(),
                "scheduler_share_of_step": sched_share, "wall_s": wall.as_secs_f64(),
                "kv_events_s_per_step": kv_events.as_secs_f64(), "kv_events_share_of_step": kv_events_share,
            });
            println!("{line}");
        } else {
            println!(
                "{n:>5} {throughput:>11.2} {:>8.2}s {:>8.2}s {:>9.0}ms {:>9.0}ms {:>11.3}%",
                percentile(&ttft, 0.5).as_secs_f64(),
                percentile(&ttft, 0.99).as_secs_f64(),
                mean_tpot.as_secs_f64() * 1e3,
                percentile(&tpot, 0.99).as_secs_f64() * 1e3,
                sched_share * 100.0,
            );
        }
    }
    engine.shutdown();
    engine.join();
    drop(engine);
    if let Some(encoder) = encoder {
        let bytes = encoder
            .join()
            .map_err(|_| anyhow::anyhow!("the encoder panicked"))?;
        eprintln!("KV events: {bytes} bytes encoded");
    }
    Ok(())
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn random_prompt(len: usize, vocab: u64, seed: u64) -> Vec<u32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % vocab) as u32
        })
        .collect()
}
