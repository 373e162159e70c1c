//! `pagoda bench forward`: prefill and decode throughput of the model runner alone (no
//! scheduler, no HTTP), per batch size, with the memory traffic (GB/s) and arithmetic
//! (GFLOP/s) that throughput implies. Sequences get scattered block tables, as in serving.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use pagoda_models::loader::load_model;
use pagoda_models::{ForwardBatch, KvCacheShape, LoadFormat, LogitsWanted, ModelRunner};

use super::forward_cost::ForwardCost;
use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub struct BenchForwardArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Batch sizes to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub batch: Vec<usize>,
    #[arg(long, default_value_t = 512)]
    pub prompt_len: usize,
    /// Decode steps after the prompt.
    #[arg(long, default_value_t = 64)]
    pub gen: usize,
    /// Most tokens in one prefill forward pass (whole prompts are packed up to this).
    #[arg(long, default_value_t = 2048)]
    pub max_batched_tokens: usize,
    /// Runs per batch size; the median is reported.
    #[arg(long, default_value_t = 1)]
    pub repeats: usize,
    /// Untimed runs per batch size before the measured ones, as `llama-bench` warms up once
    /// by default: a process's first pass also faults in fresh scratch memory (2-3% of a
    /// 512-token Q8_0 prefill on an Intel Xeon, more when the file's pages are cold).
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

struct Measurement {
    prefill: Duration,
    decode: Duration,
}

pub fn run(args: BenchForwardArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.prompt_len > 0 && args.repeats > 0,
        "--prompt-len and --repeats must be positive"
    );
    anyhow::ensure!(
        args.batch.iter().all(|&b| b > 0),
        "batch sizes must be positive"
    );
    let isa = pagoda_models::kernels::isa();
    let load = args.model.load_options();
    let dir =
        pagoda_runtime::resolve_model(&args.model.model, load.format == LoadFormat::Safetensors)?;
    let (model, dtype) = load_model(&dir, &load).context("cannot load the model")?;
    let cfg = model.config.clone();
    let block_size = args.model.block_size;
    let max_batch = args.batch.iter().copied().max().unwrap_or(1);
    let seq_len = args.prompt_len + args.gen;
    anyhow::ensure!(
        seq_len <= cfg.max_position_embeddings,
        "prompt plus generated tokens ({seq_len}) exceed the model's {} positions",
        cfg.max_position_embeddings
    );
    let blocks_needed = max_batch * seq_len.div_ceil(block_size);
    let kv_dtype = args.model.kv_cache_dtype.dtype().resolve(dtype);
    let budget = blocks_needed as u64 * KvCacheShape::bytes_per_block(&cfg, block_size, kv_dtype);
    let shape = KvCacheShape::from_budget(&cfg, block_size, budget, seq_len, kv_dtype)?;
    eprintln!(
        "{:?} {}: {} layers, hidden {}, weights {} ({:.0} MiB), KV {} {} blocks ({:.0} MiB), {} threads, {} kernels",
        cfg.architecture,
        dir.display(),
        cfg.num_layers,
        cfg.hidden_size,
        model.weight_types(),
        model.weight_bytes() as f64 / (1 << 20) as f64,
        kv_dtype,
        shape.num_blocks,
        shape.total_bytes() as f64 / (1 << 20) as f64,
        rayon_threads(),
        isa,
    );
    let bytes_per_param = ForwardCost::bytes_per_param(&cfg, model.weight_bytes());
    let cost = ForwardCost::new(&cfg, bytes_per_param, kv_dtype);
    let mut runner = ModelRunner::new(model, shape);
    warm_up(&mut runner, block_size)?;
    if !args.json {
        println!(
            "{:>6} {:>10} {:>14} {:>16} {:>14} {:>12} {:>16}",
            "batch",
            "prompt",
            "prefill tok/s",
            "prefill GFLOP/s",
            "decode tok/s",
            "decode GB/s",
            "decode GFLOP/s"
        );
    }
    for &batch in &args.batch {
        for w in 0..args.warmup {
            measure(&mut runner, &args, batch, (args.repeats + w) as u64)?;
        }
        let mut runs: Vec<Measurement> = (0..args.repeats)
            .map(|r| measure(&mut runner, &args, batch, r as u64))
            .collect::<anyhow::Result<_>>()?;
        runs.sort_by_key(|m| m.prefill);
        let prefill = runs[runs.len() / 2].prefill;
        runs.sort_by_key(|m| m.decode);
        let decode = runs[runs.len() / 2].decode;
        let prefill_tps = (batch * args.prompt_len) as f64 / prefill.as_secs_f64();
        let decode_tps = (batch * args.gen) as f64 / decode.as_secs_f64().max(f64::MIN_POSITIVE);
        let passes = batch.div_ceil((args.max_batched_tokens / args.prompt_len).max(1));
        let (b, len, gen) = (batch as u64, args.prompt_len as u64, args.gen as u64);
        let (_, prefill_gflops) = cost
            .prefill(b, len, passes as u64)
            .rates(prefill.as_secs_f64());
        let (decode_gbps, decode_gflops) = cost.decode(b, len, gen).rates(decode.as_secs_f64());
        if args.json {
            let line = serde_json::json!({
                "batch": batch, "prompt_len": args.prompt_len, "gen": args.gen,
                "prefill_tokens_per_s": prefill_tps, "decode_tokens_per_s": decode_tps,
                "prefill_s": prefill.as_secs_f64(), "decode_s": decode.as_secs_f64(),
                "prefill_gflops": prefill_gflops,
                "decode_gbytes_per_s": decode_gbps, "decode_gflops": decode_gflops,
            });
            println!("{line}");
        } else {
            println!(
                "{batch:>6} {:>10} {prefill_tps:>14.1} {prefill_gflops:>16.1} {decode_tps:>14.2} {decode_gbps:>12.1} {decode_gflops:>16.1}",
                args.prompt_len
            );
        }
    }
    Ok(())
}

/// The kernels' thread count (`RAYON_NUM_THREADS` when set, else every core).
fn rayon_threads() -> usize {
    pagoda_models::kernels::num_threads()
}

fn warm_up(runner: &mut ModelRunner, block_size: usize) -> anyhow::Result<()> {
    let mut batch = ForwardBatch::new(block_size);
    batch.push(&[1, 2, 3, 4], 0, &[0], LogitsWanted::Last)?;
    runner.forward(&batch)?;
    Ok(())
}

/// Prefills `batch` random prompts (packed into passes of at most `max_batched_tokens`), then
/// decodes `gen` tokens for all of them together.
fn measure(
    runner: &mut ModelRunner,
    args: &BenchForwardArgs,
    batch: usize,
    seed: u64,
) -> anyhow::Result<Measurement> {
    let block_size = args.model.block_size;
    let vocab = runner.model().config.vocab_size as u64;
    let blocks_per_seq = (args.prompt_len + args.gen).div_ceil(block_size);
    let num_blocks = runner.kv_shape().num_blocks;
    // Scatter sequences over the cache: sequence s takes every `batch`-th block.
    let tables: Vec<Vec<u32>> = (0..batch)
        .map(|s| {
            (0..blocks_per_seq)
                .map(|i| ((i * batch + s) % num_blocks) as u32)
                .collect()
        })
        .collect();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut random_token = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % vocab) as u32
    };
    let prompts: Vec<Vec<u32>> = (0..batch)
        .map(|_| (0..args.prompt_len).map(|_| random_token()).collect())
        .collect();

    let start = Instant::now();
    let mut next = Vec::with_capacity(batch);
    let per_pass = (args.max_batched_tokens / args.prompt_len).max(1);
    for group in (0..batch).collect::<Vec<_>>().chunks(per_pass) {
        let mut forward = ForwardBatch::new(block_size);
        for &s in group {
            forward.push(&prompts[s], 0, &tables[s], LogitsWanted::Last)?;
        }
        let logits = runner.forward(&forward)?;
        next.extend((0..group.len()).map(|r| argmax(logits.row(r))));
    }
    let prefill = start.elapsed();

    let start = Instant::now();
    for step in 0..args.gen {
        let mut forward = ForwardBatch::new(block_size);
        for s in 0..batch {
            forward.push(
                &[next[s]],
                args.prompt_len + step,
                &tables[s],
                LogitsWanted::Last,
            )?;
        }
        let logits = runner.forward(&forward)?;
        for (s, token) in next.iter_mut().enumerate() {
            *token = argmax(logits.row(s));
        }
    }
    Ok(Measurement {
        prefill,
        decode: start.elapsed(),
    })
}

fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in row.iter().enumerate() {
        if *v > row[best] {
            best = i;
        }
    }
    best as u32
}
