//! `pagoda generate`: one prompt through the engine, printed as text or JSON.

use anyhow::Context;
use clap::Args;
use pagoda_runtime::{GenerateRequest, SamplingParams};

use crate::model_args::ModelArgs;

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[arg(long)]
    pub prompt: String,
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    /// 0 is greedy; defaults to the model's generation_config.json, else 1.0.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Defaults to the model's generation_config.json, else 1.0.
    #[arg(long)]
    pub top_p: Option<f32>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Keep generating past EOS tokens.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Print {"token_ids", "text", "prompt_tokens"} instead of the text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let engine =
        pagoda_runtime::start(args.model.engine_config()?).context("cannot load the model")?;
    let defaults = &engine.info().generation_config;
    let prompt_token_ids = engine.tokenizer().encode(&args.prompt, true)?;
    let sampling = SamplingParams {
        temperature: args.temperature.or(defaults.temperature).unwrap_or(1.0),
        top_p: args.top_p.or(defaults.top_p).unwrap_or(1.0),
        seed: args.seed,
        max_tokens: Some(args.max_tokens),
        ignore_eos: args.ignore_eos,
        ..SamplingParams::default()
    };
    let prompt_tokens = prompt_token_ids.len();
    let mut stream = engine.submit(GenerateRequest::new(prompt_token_ids, sampling))?;
    let info = engine.info();
    eprintln!(
        "{:?}, {} weights ({:.0} MiB); KV cache {} blocks of {} tokens ({:.0} MiB), max model length {}",
        info.architecture,
        info.weight_types,
        info.weight_bytes as f64 / (1 << 20) as f64,
        info.kv_cache.num_blocks,
        info.kv_cache.block_size,
        info.kv_cache_bytes as f64 / (1 << 20) as f64,
        info.max_model_len,
    );
    let mut token_ids = Vec::new();
    let mut text = String::new();
    while let Some(output) = stream.blocking_next() {
        token_ids.extend_from_slice(&output.token_ids);
        if !args.json {
            print!("{}", output.text);
            use std::io::Write;
            std::io::stdout().flush().ok();
        }
        text.push_str(&output.text);
        if let Some(done) = output.finished {
            if let Some(error) = done.error {
                anyhow::bail!("generation failed: {error}");
            }
        }
    }
    if args.json {
        let out = serde_json::json!({"token_ids": token_ids, "text": text, "prompt_tokens": prompt_tokens});
        println!("{out}");
    } else {
        println!();
    }
    engine.shutdown();
    engine.join();
    Ok(())
}
