//! `pagoda serve`'s flags. Every flag also reads a `PAGODA_*` environment variable and a key
//! of the `--config` TOML file; see `settings.rs` for the precedence.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Clone, Default, Args)]
pub struct ServeArgs {
    /// Model directory (config.json, *.safetensors, tokenizer.json), GGUF file, Hugging Face
    /// hub id, or `repo:QUANT` for one GGUF file of a hub repo; required here, in the
    /// environment or in the config file.
    #[arg(long, env = "PAGODA_MODEL")]
    pub model: Option<String>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long, env = "PAGODA_HOST")]
    pub host: Option<String>,
    /// Port to listen on; 0 picks a free one [default: 8000].
    #[arg(long, env = "PAGODA_PORT")]
    pub port: Option<u16>,
    /// Names clients use in `model`, comma separated; the first is reported [default: --model].
    #[arg(long, env = "PAGODA_SERVED_MODEL_NAME", value_delimiter = ',')]
    pub served_model_name: Option<Vec<String>>,
    /// Jinja chat template file (or inline template) replacing the model's own.
    #[arg(long, env = "PAGODA_CHAT_TEMPLATE")]
    pub chat_template: Option<String>,
    /// How the model writes tool calls: hermes (Qwen2.5, Qwen3, Hermes), llama3_json,
    /// mistral, none, or auto (from the chat template's markers) [default: auto].
    #[arg(long, env = "PAGODA_TOOL_CALL_PARSER")]
    pub tool_call_parser: Option<String>,
    /// Split a reasoning model's `<think>` text into `reasoning_content`: qwen3 or
    /// deepseek_r1 [default: off].
    #[arg(long, env = "PAGODA_REASONING_PARSER")]
    pub reasoning_parser: Option<String>,
    /// Weights: auto (the directory's safetensors) or dummy (seeded random) [default: auto].
    #[arg(long, env = "PAGODA_LOAD_FORMAT")]
    pub load_format: Option<String>,
    /// Weight dtype: auto, float32, float16 or bfloat16 [default: auto].
    #[arg(long, env = "PAGODA_DTYPE")]
    pub dtype: Option<String>,
    /// How a GGUF file's Q4_0/Q5_0 blocks are held: auto (widened to Q8_0 where that is
    /// faster on this CPU), off (the file's blocks) or q8_0 [default: auto].
    #[arg(long, env = "PAGODA_QUANT_REPACK")]
    pub quant_repack: Option<String>,
    /// How a GGUF file's quantized weights are multiplied: exact (blocks decoded to f32) or
    /// int8 (activations quantized per 32 values, integer products) [default: int8].
    #[arg(long, env = "PAGODA_QUANT_DOT")]
    pub quant_dot: Option<String>,
    /// Where a GGUF file's quantized weights are read from: auto (copied at load into
    /// memory backed by 2 MiB pages where the kernel offers them) or mapped (the file's
    /// map, no copy) [default: auto].
    #[arg(long, env = "PAGODA_QUANT_PAGES")]
    pub quant_pages: Option<String>,
    /// KV cache size: bytes or with a unit, e.g. 512MiB, 2GiB [default: 2GiB].
    #[arg(long, env = "PAGODA_KV_CACHE_MEMORY", value_parser = parse_byte_size)]
    pub kv_cache_memory: Option<u64>,
    /// What the KV cache stores: auto (the weights' dtype), float32, float16 or bfloat16
    /// [default: auto].
    #[arg(long, env = "PAGODA_KV_CACHE_DTYPE")]
    pub kv_cache_dtype: Option<String>,
    /// Longest sequence, prompt plus output [default: the model's max_position_embeddings].
    #[arg(long, env = "PAGODA_MAX_MODEL_LEN")]
    pub max_model_len: Option<usize>,
    /// Most sequences running at once [default: 64].
    #[arg(long, env = "PAGODA_MAX_NUM_SEQS")]
    pub max_num_seqs: Option<usize>,
    /// Token budget of one engine step [default: 512].
    #[arg(long, env = "PAGODA_MAX_NUM_BATCHED_TOKENS")]
    pub max_num_batched_tokens: Option<usize>,
    /// Keep every engine step under this many milliseconds (the inter-token latency running
    /// requests see) by sizing prefill chunks with a step-cost model fitted from measured
    /// steps; SLO classes with an `itl` target may ask for less [default: none, steps are
    /// sized by --max-num-batched-tokens].
    #[arg(long, env = "PAGODA_TARGET_ITL_MS")]
    pub target_itl_ms: Option<u32>,
    /// An SLO class, NAME[:ttft=MS][,itl=MS], e.g. interactive:ttft=1000,itl=100 or batch;
    /// repeat for more (semicolon-separated in the environment). Requests choose one with
    /// `slo_class`, tenants get theirs from the gateway policy; attainment is on /metrics.
    #[arg(long, env = "PAGODA_SLO_CLASS", value_delimiter = ';')]
    pub slo_class: Option<Vec<String>>,
    /// The SLO class of requests that name none and whose tenant has none defined.
    #[arg(long, env = "PAGODA_DEFAULT_SLO_CLASS")]
    pub default_slo_class: Option<String>,
    /// Tokens per KV block [default: 16].
    #[arg(long, env = "PAGODA_BLOCK_SIZE")]
    pub block_size: Option<usize>,
    /// Sequences in flight before requests get 429 [default: 1024].
    #[arg(long, env = "PAGODA_MAX_PENDING_REQUESTS")]
    pub max_pending_requests: Option<usize>,
    /// Turn automatic prefix caching off.
    #[arg(long, env = "PAGODA_DISABLE_PREFIX_CACHING")]
    pub disable_prefix_caching: bool,
    /// How long SIGTERM waits for in-flight requests, e.g. 30s, 2m [default: 30s].
    #[arg(long, env = "PAGODA_DRAIN_TIMEOUT", value_parser = parse_duration)]
    pub drain_timeout: Option<Duration>,
    /// Gateway database (API keys; cost events with the default sink). Setting it puts
    /// every request behind API keys; without it the server is open, as before.
    #[arg(long, env = "PAGODA_GATEWAY_DB")]
    pub gateway_db: Option<PathBuf>,
    /// Gateway policy file (tenants, limits, budgets, prices), reloaded when it changes.
    #[arg(long, env = "PAGODA_GATEWAY_CONFIG")]
    pub gateway_config: Option<PathBuf>,
    /// Where cost events go: sqlite (the gateway database), sqlite=PATH, jsonl=PATH or
    /// clickhouse=http://HOST:8123 [default: sqlite].
    #[arg(long, env = "PAGODA_METERING_SINK")]
    pub metering_sink: Option<String>,
    /// Keep rate and budget counters in Redis (e.g. redis://127.0.0.1:6379) so replicas
    /// share them [default: in process].
    #[arg(long, env = "PAGODA_REDIS_URL")]
    pub redis_url: Option<String>,
    /// While the metering store fails (its events are kept and retried either way): refuse
    /// new requests with 503, or serve on [default: refuse].
    #[arg(long, env = "PAGODA_METERING_ON_FAILURE")]
    pub metering_on_failure: Option<String>,
    /// Guardrail policy (TOML: PII actions, injection threshold, canaries, per tenant).
    /// Without it requests are not screened, as before.
    #[arg(long, env = "PAGODA_GUARD_CONFIG")]
    pub guard_config: Option<PathBuf>,
    /// Append-only, hash-chained JSONL log of every guardrail decision (needs
    /// --guard-config); check it with `pagoda audit verify`.
    #[arg(long, env = "PAGODA_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// Key file (32 bytes or more) making the audit log a keyed HMAC chain, which only a
    /// holder of the key can extend or rewrite; verify with `pagoda audit verify --key`.
    #[arg(long, env = "PAGODA_AUDIT_KEY")]
    pub audit_key: Option<PathBuf>,
    /// Folder of saved reports the operator console shows (needs --gateway-db): JSON of
    /// `pagoda bench`, `pagoda plan --out` and `pagoda redteam --out`, and bench SVG plots.
    /// Only plain files directly inside it are read; links and subfolders are ignored.
    #[arg(long, env = "PAGODA_CONSOLE_REPORTS_DIR")]
    pub console_reports_dir: Option<PathBuf>,
    /// Largest request body, e.g. 8MiB; larger bodies get 413 [default: 8MiB].
    #[arg(long, env = "PAGODA_MAX_BODY_BYTES", value_parser = parse_byte_size)]
    pub max_body_bytes: Option<u64>,
    /// Most bytes of prompt text per request, before tokenization [default: 2MiB].
    #[arg(long, env = "PAGODA_MAX_PROMPT_BYTES", value_parser = parse_byte_size)]
    pub max_prompt_bytes: Option<u64>,
    /// Most entries of `messages` [default: 4096].
    #[arg(long, env = "PAGODA_MAX_MESSAGES")]
    pub max_messages: Option<usize>,
    /// Most `stop` strings per request [default: 16].
    #[arg(long, env = "PAGODA_MAX_STOP_SEQUENCES")]
    pub max_stop_sequences: Option<usize>,
    /// Most bytes of one stop string [default: 256].
    #[arg(long, env = "PAGODA_MAX_STOP_BYTES")]
    pub max_stop_bytes: Option<usize>,
    /// Most `stop_token_ids` per request [default: 256].
    #[arg(long, env = "PAGODA_MAX_STOP_TOKEN_IDS")]
    pub max_stop_token_ids: Option<usize>,
    /// Most `logit_bias` entries per request [default: 300].
    #[arg(long, env = "PAGODA_MAX_LOGIT_BIAS")]
    pub max_logit_bias: Option<usize>,
    /// Most sequences one request runs (n x prompts) [default: 128].
    #[arg(long, env = "PAGODA_MAX_SEQS_PER_REQUEST")]
    pub max_seqs_per_request: Option<usize>,
    /// Sequences one tenant may have queued or running before its requests get 429
    /// [default: half of --max-pending-requests].
    #[arg(long, env = "PAGODA_MAX_PENDING_PER_TENANT")]
    pub max_pending_per_tenant: Option<usize>,
    /// Outputs per choice a client may leave unread on a stream before its request is
    /// aborted (finish_reason "abort"; what was generated is billed); 0: no limit
    /// [default: 512].
    #[arg(long, env = "PAGODA_MAX_UNREAD_OUTPUTS")]
    pub max_unread_outputs: Option<usize>,
    /// Also publish metrics under another engine's names for cluster pickers and routers
    /// that scrape them: `vllm` (llm-d's Endpoint Picker, vLLM production-stack) [default:
    /// none].
    #[arg(long, env = "PAGODA_METRICS_COMPAT")]
    pub metrics_compat: Option<String>,
    /// Publish KV-cache events for prefix-aware routers (llm-d's KV indexer) on a ZeroMQ PUB
    /// socket in vLLM's format: bound when the address has a `*` (`tcp://*:5557`), else
    /// connected [default: none].
    #[arg(long, env = "PAGODA_KV_EVENTS_ENDPOINT")]
    pub kv_events_endpoint: Option<String>,
    /// A ZeroMQ ROUTER socket (bound) that replays recent KV-event batches to a DEALER that
    /// sends `["", start_seq]` [default: none].
    #[arg(long, env = "PAGODA_KV_EVENTS_REPLAY_ENDPOINT")]
    pub kv_events_replay_endpoint: Option<String>,
    /// The KV events' topic [default: kv@HOST:PORT@SERVED_MODEL_NAME, HOST the machine's
    /// name when --host is 0.0.0.0 or ::].
    #[arg(long, env = "PAGODA_KV_EVENTS_TOPIC")]
    pub kv_events_topic: Option<String>,
    /// A request's headers must arrive within this long of the connection's accept (first
    /// request) or of the request's first byte, else the connection is closed [default: 10s].
    #[arg(long, env = "PAGODA_HEADER_TIMEOUT", value_parser = parse_duration)]
    pub header_timeout: Option<Duration>,
    /// An idle connection between requests is closed after this long [default: 60s].
    #[arg(long, env = "PAGODA_KEEP_ALIVE_TIMEOUT", value_parser = parse_duration)]
    pub keep_alive_timeout: Option<Duration>,
    /// A request body not fully arrived this long after its headers gets 408 [default: 30s].
    #[arg(long, env = "PAGODA_BODY_TIMEOUT", value_parser = parse_duration)]
    pub body_timeout: Option<Duration>,
    /// A connection on which no byte could be written for this long (the client stopped
    /// reading) is closed, which aborts its request [default: 30s].
    #[arg(long, env = "PAGODA_WRITE_TIMEOUT", value_parser = parse_duration)]
    pub write_timeout: Option<Duration>,
    /// Connections served at once; more wait in the kernel's accept backlog [default: 1024].
    #[arg(long, env = "PAGODA_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// TOML file with any of these settings, keyed by flag name (max-model-len or
    /// max_model_len); flags and environment variables override it.
    #[arg(long, env = "PAGODA_CONFIG")]
    pub config: Option<PathBuf>,
}

/// "2GiB", "512MiB", "1.5GB", "4096" (bytes). Binary units for KiB/MiB/GiB/TiB and bare
/// K/M/G/T, decimal for KB/MB/GB/TB.
pub fn parse_byte_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 512MiB, 2GiB or 1073741824"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => {
            return Err(format!(
                "unknown size unit `{other}` (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    Ok((number * scale).round() as u64)
}

/// "30s", "2m", "500ms", "45" (seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration such as 30s, 2m or 500ms"))?;
    let seconds = match unit.trim() {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        other => return Err(format!("unknown duration unit `{other}` (use ms, s, m, h)")),
    };
    // `from_secs_f64` would panic on a number too large for a Duration.
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{text}` is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_accept_binary_and_decimal_units() {
        assert_eq!(parse_byte_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_byte_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_byte_size("512M"), Ok(512 << 20));
        assert_eq!(parse_byte_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_byte_size("4096"), Ok(4096));
        assert!(parse_byte_size("lots").is_err());
        assert!(parse_byte_size("3 parsecs").is_err());
    }

    #[test]
    fn durations_accept_common_units() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn durations_too_large_or_negative_are_errors_not_panics() {
        assert!(parse_duration("99999999999999999999999h").is_err());
        assert!(parse_duration(&format!("1{}s", "0".repeat(400))).is_err());
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("1e9s").is_err());
        assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
    }

    #[test]
    fn the_http_flags_parse() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let cli = Cli::try_parse_from([
            "pagoda",
            "--header-timeout",
            "2s",
            "--keep-alive-timeout",
            "90",
            "--body-timeout",
            "500ms",
            "--write-timeout",
            "1m",
            "--max-connections",
            "16",
        ])
        .unwrap();
        assert_eq!(cli.serve.header_timeout, Some(Duration::from_secs(2)));
        assert_eq!(cli.serve.keep_alive_timeout, Some(Duration::from_secs(90)));
        assert_eq!(cli.serve.body_timeout, Some(Duration::from_millis(500)));
        assert_eq!(cli.serve.write_timeout, Some(Duration::from_secs(60)));
        assert_eq!(cli.serve.max_connections, Some(16));
        assert!(Cli::try_parse_from(["pagoda", "--write-timeout", "1e99h"]).is_err());
    }
}
