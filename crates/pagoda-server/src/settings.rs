//! The serve settings: flags and `PAGODA_*` environment variables (clap reads both) override
//! the `--config` TOML file, which overrides the built-in defaults.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use pagoda_gateway::{GatewayConfig, GatewayError, SinkSpec};
use pagoda_models::{KvCacheDtype, LoadFormat, QuantDot, QuantPages, QuantRepack, WeightDtype};
use pagoda_runtime::EngineConfig;
use serde::Deserialize;

use crate::args::{parse_byte_size, parse_duration, ServeArgs};
use crate::chat_output::{ChatFeatures, ToolParser};
use crate::error::ServerError;
use crate::guard::GuardSettings;
use crate::http::HttpLimits;
use crate::kv_events::{default_topic, KvEventsSettings};
use crate::limits::RequestLimits;
use crate::slo::{SloClass, SloClasses};
use pagoda_text::reasoning::ReasoningFormat;
use pagoda_text::tool_calls::ToolCallFormat;

/// Everything `run_serve` needs, resolved and checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub model: String,
    pub host: String,
    pub port: u16,
    pub served_model_names: Vec<String>,
    pub chat_template: Option<String>,
    pub engine: EngineConfig,
    pub drain_timeout: Duration,
    /// `None`: no gateway, the server is open.
    pub gateway: Option<GatewayConfig>,
    /// `None`: no guardrails, requests are not screened.
    pub guard: Option<GuardSettings>,
    /// Caps on what one request may ask for.
    pub limits: RequestLimits,
    /// `--metrics-compat vllm`: the vLLM metric names as well.
    pub vllm_metrics: bool,
    /// `--tool-call-parser` and `--reasoning-parser`.
    pub chat_features: ChatFeatures,
    /// Connection deadlines and the connection cap.
    pub http: HttpLimits,
    /// Named latency targets requests run under.
    pub slo_classes: SloClasses,
    /// Where the console finds saved bench, plan and red-team reports.
    pub console_reports_dir: Option<PathBuf>,
    /// `--kv-events-endpoint` and the rest: `None`, no KV events.
    pub kv_events: Option<KvEventsSettings>,
}

/// The TOML file: the same keys as the flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileSettings {
    model: Option<String>,
    host: Option<String>,
    port: Option<u16>,
    served_model_name: Option<NameList>,
    chat_template: Option<String>,
    tool_call_parser: Option<String>,
    reasoning_parser: Option<String>,
    load_format: Option<String>,
    dtype: Option<String>,
    quant_repack: Option<String>,
    quant_dot: Option<String>,
    quant_pages: Option<String>,
    kv_cache_memory: Option<Size>,
    kv_cache_dtype: Option<String>,
    max_model_len: Option<usize>,
    max_num_seqs: Option<usize>,
    max_num_batched_tokens: Option<usize>,
    target_itl_ms: Option<u32>,
    slo_class: Option<NameList>,
    default_slo_class: Option<String>,
    block_size: Option<usize>,
    max_pending_requests: Option<usize>,
    disable_prefix_caching: Option<bool>,
    drain_timeout: Option<Size>,
    gateway_db: Option<PathBuf>,
    gateway_config: Option<PathBuf>,
    metering_sink: Option<String>,
    redis_url: Option<String>,
    metering_on_failure: Option<String>,
    guard_config: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    audit_key: Option<PathBuf>,
    console_reports_dir: Option<PathBuf>,
    max_body_bytes: Option<Size>,
    max_prompt_bytes: Option<Size>,
    max_messages: Option<usize>,
    max_stop_sequences: Option<usize>,
    max_stop_bytes: Option<usize>,
    max_stop_token_ids: Option<usize>,
    max_logit_bias: Option<usize>,
    max_seqs_per_request: Option<usize>,
    max_pending_per_tenant: Option<usize>,
    max_unread_outputs: Option<usize>,
    metrics_compat: Option<String>,
    kv_events_endpoint: Option<String>,
    kv_events_replay_endpoint: Option<String>,
    kv_events_topic: Option<String>,
    header_timeout: Option<Size>,
    keep_alive_timeout: Option<Size>,
    body_timeout: Option<Size>,
    write_timeout: Option<Size>,
    max_connections: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NameList {
    One(String),
    Many(Vec<String>),
}

impl NameList {
    fn into_vec(self) -> Vec<String> {
        match self {
            NameList::One(name) => vec![name],
            NameList::Many(names) => names,
        }
    }
}

/// A number, or a string with a unit ("2GiB", "30s").
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Size {
    Number(u64),
    Text(String),
}

impl Settings {
    pub fn resolve(args: ServeArgs) -> Result<Settings, ServerError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => FileSettings::default(),
        };
        let limits = request_limits(&args, &file)?;
        let http = http_limits(&args, &file)?;
        let model = args.model.or(file.model).ok_or(ServerError::Setting {
            field: "model",
            reason: "no model given (use --model, PAGODA_MODEL or `model` in the config file)"
                .into(),
        })?;
        let served_model_names = match (args.served_model_name, file.served_model_name) {
            (Some(names), _) | (None, Some(NameList::Many(names))) => names,
            (None, Some(NameList::One(name))) => vec![name],
            (None, None) => vec![model.clone()],
        };
        if served_model_names.is_empty() || served_model_names.iter().any(|n| n.is_empty()) {
            return Err(ServerError::Setting {
                field: "served-model-name",
                reason: "names must not be empty".into(),
            });
        }
        let mut engine = EngineConfig::new(PathBuf::from(&model));
        let load_format = args.load_format.or(file.load_format);
        engine.load.format = match load_format.as_deref() {
            None | Some("auto") | Some("safetensors") => LoadFormat::Safetensors,
            Some("dummy") => LoadFormat::Dummy,
            Some(other) => {
                return Err(setting(
                    "load-format",
                    format!("`{other}` is not auto, safetensors or dummy"),
                ))
            }
        };
        engine.load.dtype = match args.dtype.or(file.dtype).as_deref() {
            None | Some("auto") => None,
            Some(name) => Some(WeightDtype::parse(name).ok_or_else(|| {
                setting(
                    "dtype",
                    format!("`{name}` is not auto, float32, float16 or bfloat16"),
                )
            })?),
        };
        engine.load.repack = match args.quant_repack.or(file.quant_repack).as_deref() {
            None | Some("auto") => QuantRepack::Auto,
            Some("off") => QuantRepack::Off,
            Some("q8_0") => QuantRepack::Q8_0,
            Some(other) => {
                return Err(setting(
                    "quant-repack",
                    format!("`{other}` is not auto, off or q8_0"),
                ))
            }
        };
        engine.load.quant_dot = match args.quant_dot.or(file.quant_dot).as_deref() {
            Some("exact") => QuantDot::Exact,
            None | Some("int8") => QuantDot::Int8,
            Some(other) => {
                return Err(setting(
                    "quant-dot",
                    format!("`{other}` is not exact or int8"),
                ))
            }
        };
        engine.load.pages = match args.quant_pages.or(file.quant_pages).as_deref() {
            None | Some("auto") => QuantPages::Auto,
            Some("mapped") => QuantPages::Mapped,
            Some(other) => {
                return Err(setting(
                    "quant-pages",
                    format!("`{other}` is not auto or mapped"),
                ))
            }
        };
        if let Some(bytes) = args
            .kv_cache_memory
            .map(Ok)
            .or(file.kv_cache_memory.map(size_bytes))
        {
            engine.kv_cache_memory = bytes?;
        }
        if let Some(name) = args.kv_cache_dtype.or(file.kv_cache_dtype) {
            engine.kv_cache_dtype = KvCacheDtype::parse(&name).ok_or_else(|| {
                setting(
                    "kv-cache-dtype",
                    format!("`{name}` is not auto, float32, float16 or bfloat16"),
                )
            })?;
        }
        engine.max_model_len = args.max_model_len.or(file.max_model_len);
        set(
            &mut engine.max_num_seqs,
            args.max_num_seqs.or(file.max_num_seqs),
        );
        set(
            &mut engine.max_num_batched_tokens,
            args.max_num_batched_tokens.or(file.max_num_batched_tokens),
        );
        engine.max_prefill_chunk = engine.max_prefill_chunk.min(engine.max_num_batched_tokens);
        engine.target_itl_ms = match args.target_itl_ms.or(file.target_itl_ms) {
            Some(0) => return Err(setting("target-itl-ms", "must be at least 1".into())),
            target => target,
        };
        let slo_classes = slo_classes(
            args.slo_class.or(file.slo_class.map(NameList::into_vec)),
            args.default_slo_class.or(file.default_slo_class),
        )?;
        set(&mut engine.block_size, args.block_size.or(file.block_size));
        set(
            &mut engine.max_pending_requests,
            args.max_pending_requests.or(file.max_pending_requests),
        );
        engine.enable_prefix_caching =
            !(args.disable_prefix_caching || file.disable_prefix_caching.unwrap_or(false));
        let drain_timeout = match args
            .drain_timeout
            .map(Ok)
            .or(file.drain_timeout.map(size_duration))
        {
            Some(d) => d?,
            None => Duration::from_secs(30),
        };
        let mut gateway = gateway_config(
            args.gateway_db.or(file.gateway_db),
            args.gateway_config.or(file.gateway_config),
            args.metering_sink.or(file.metering_sink),
            args.redis_url.or(file.redis_url),
        )?;
        if let Some(mode) = args.metering_on_failure.or(file.metering_on_failure) {
            let mode = mode
                .parse()
                .map_err(|e: GatewayError| setting("metering-on-failure", e.to_string()))?;
            match &mut gateway {
                Some(config) => config.metering_on_failure = mode,
                None => {
                    return Err(setting(
                        "metering-on-failure",
                        "needs --gateway-db (there is no metering without the gateway)".into(),
                    ))
                }
            }
        }
        engine.max_pending_per_tenant =
            match args.max_pending_per_tenant.or(file.max_pending_per_tenant) {
                Some(0) => {
                    return Err(setting(
                        "max-pending-per-tenant",
                        "must be at least 1".into(),
                    ))
                }
                Some(n) => n,
                None => (engine.max_pending_requests / 2).max(1),
            };
        if let Some(n) = args.max_unread_outputs.or(file.max_unread_outputs) {
            engine.max_unread_outputs = n;
        }
        let vllm_metrics = match args.metrics_compat.or(file.metrics_compat).as_deref() {
            None | Some("none") => false,
            Some("vllm") => true,
            Some(other) => {
                return Err(setting(
                    "metrics-compat",
                    format!("`{other}` is not none or vllm"),
                ))
            }
        };
        let chat_features = ChatFeatures {
            tool_parser: match args.tool_call_parser.or(file.tool_call_parser).as_deref() {
                None | Some("auto") => ToolParser::Detect,
                Some("none") => ToolParser::Off,
                Some(name) => ToolParser::Format(ToolCallFormat::parse(name).ok_or_else(|| {
                    setting(
                        "tool-call-parser",
                        format!("`{name}` is not hermes, llama3_json, mistral, none or auto"),
                    )
                })?),
            },
            reasoning: args
                .reasoning_parser
                .or(file.reasoning_parser)
                .filter(|name| name != "none")
                .map(|name| {
                    ReasoningFormat::parse(&name).ok_or_else(|| {
                        setting(
                            "reasoning-parser",
                            format!("`{name}` is not qwen3, deepseek_r1 or none"),
                        )
                    })
                })
                .transpose()?,
        };
        let guard = guard_settings(
            args.guard_config.or(file.guard_config),
            args.audit_log.or(file.audit_log),
            args.audit_key.or(file.audit_key),
        )?;
        let console_reports_dir = args.console_reports_dir.or(file.console_reports_dir);
        if console_reports_dir.is_some() && gateway.is_none() {
            return Err(setting(
                "console-reports-dir",
                "the console that shows the reports needs --gateway-db".into(),
            ));
        }
        let host = args
            .host
            .or(file.host)
            .unwrap_or_else(|| "127.0.0.1".into());
        let port = args.port.or(file.port).unwrap_or(8000);
        let kv_events = kv_events_settings(
            args.kv_events_endpoint.or(file.kv_events_endpoint),
            args.kv_events_replay_endpoint
                .or(file.kv_events_replay_endpoint),
            args.kv_events_topic.or(file.kv_events_topic),
            || default_topic(&topic_host(&host), port, &served_model_names[0]),
        )?;
        Ok(Settings {
            model,
            host,
            port,
            served_model_names,
            chat_template: args.chat_template.or(file.chat_template),
            engine,
            drain_timeout,
            gateway,
            guard,
            limits,
            vllm_metrics,
            chat_features,
            http,
            slo_classes,
            console_reports_dir,
            kv_events,
        })
    }

    pub fn bind_address(&self) -> Result<SocketAddr, ServerError> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let ip = host
            .parse()
            .map_err(|_| setting("host", format!("`{}` is not an IP address", self.host)))?;
        Ok(SocketAddr::new(ip, self.port))
    }
}

fn kv_events_settings(
    endpoint: Option<String>,
    replay_endpoint: Option<String>,
    topic: Option<String>,
    default_topic: impl FnOnce() -> String,
) -> Result<Option<KvEventsSettings>, ServerError> {
    let Some(endpoint) = endpoint else {
        if replay_endpoint.is_some() || topic.is_some() {
            return Err(setting(
                "kv-events-endpoint",
                "--kv-events-replay-endpoint and --kv-events-topic need it".into(),
            ));
        }
        return Ok(None);
    };
    for (field, address) in [
        ("kv-events-endpoint", Some(&endpoint)),
        ("kv-events-replay-endpoint", replay_endpoint.as_ref()),
    ] {
        if let Some(address) = address {
            if !address.starts_with("tcp://") {
                return Err(setting(
                    field,
                    format!("`{address}` is not a tcp:// address"),
                ));
            }
        }
    }
    Ok(Some(KvEventsSettings {
        endpoint,
        replay_endpoint,
        topic: topic.unwrap_or_else(default_topic),
    }))
}

/// The address routers know this server by: `--host`, or the machine's name (a pod's name in
/// Kubernetes) when that listens on every interface.
fn topic_host(host: &str) -> String {
    let any = matches!(host, "0.0.0.0" | "::" | "[::]");
    if !any {
        return host.to_string();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn slo_classes(
    specs: Option<Vec<String>>,
    default: Option<String>,
) -> Result<SloClasses, ServerError> {
    let classes = specs
        .unwrap_or_default()
        .iter()
        .map(|spec| SloClass::parse(spec.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|reason| setting("slo-class", reason))?;
    SloClasses::new(classes, default).map_err(|reason| setting("slo-class", reason))
}

/// The request caps: flags, then the file, then the defaults; none may be 0.
fn request_limits(args: &ServeArgs, file: &FileSettings) -> Result<RequestLimits, ServerError> {
    let mut limits = RequestLimits::default();
    let bytes = |arg: Option<u64>,
                 file: &Option<Size>,
                 field: &'static str|
     -> Result<Option<usize>, ServerError> {
        let value = match (arg, file) {
            (Some(b), _) => b,
            (None, Some(Size::Number(b))) => *b,
            (None, Some(Size::Text(t))) => parse_byte_size(t).map_err(|r| setting(field, r))?,
            (None, None) => return Ok(None),
        };
        Ok(Some(usize::try_from(value).unwrap_or(usize::MAX)))
    };
    let fields: [(&mut usize, Option<usize>, &'static str); 8] = [
        (
            &mut limits.max_body_bytes,
            bytes(args.max_body_bytes, &file.max_body_bytes, "max-body-bytes")?,
            "max-body-bytes",
        ),
        (
            &mut limits.max_prompt_bytes,
            bytes(
                args.max_prompt_bytes,
                &file.max_prompt_bytes,
                "max-prompt-bytes",
            )?,
            "max-prompt-bytes",
        ),
        (
            &mut limits.max_messages,
            args.max_messages.or(file.max_messages),
            "max-messages",
        ),
        (
            &mut limits.max_stop_sequences,
            args.max_stop_sequences.or(file.max_stop_sequences),
            "max-stop-sequences",
        ),
        (
            &mut limits.max_stop_bytes,
            args.max_stop_bytes.or(file.max_stop_bytes),
            "max-stop-bytes",
        ),
        (
            &mut limits.max_stop_token_ids,
            args.max_stop_token_ids.or(file.max_stop_token_ids),
            "max-stop-token-ids",
        ),
        (
            &mut limits.max_logit_bias,
            args.max_logit_bias.or(file.max_logit_bias),
            "max-logit-bias",
        ),
        (
            &mut limits.max_seqs_per_request,
            args.max_seqs_per_request.or(file.max_seqs_per_request),
            "max-seqs-per-request",
        ),
    ];
    for (slot, value, field) in fields {
        match value {
            Some(0) => return Err(setting(field, "must be at least 1".into())),
            Some(v) => *slot = v,
            None => {}
        }
    }
    Ok(limits)
}

/// The connection limits: flags, then the file, then the defaults; none may be 0.
fn http_limits(args: &ServeArgs, file: &FileSettings) -> Result<HttpLimits, ServerError> {
    let defaults = HttpLimits::default();
    let duration = |arg: Option<Duration>,
                    file: &Option<Size>,
                    field: &'static str,
                    default: Duration|
     -> Result<Duration, ServerError> {
        let value = match (arg, file) {
            (Some(d), _) => d,
            // A bare number in the file is seconds, as for drain-timeout.
            (None, Some(Size::Number(n))) => Duration::from_secs(*n),
            (None, Some(Size::Text(t))) => parse_duration(t).map_err(|r| setting(field, r))?,
            (None, None) => default,
        };
        if value.is_zero() {
            return Err(setting(field, "must be more than 0".into()));
        }
        Ok(value)
    };
    let max_connections = match args.max_connections.or(file.max_connections) {
        Some(0) => return Err(setting("max-connections", "must be at least 1".into())),
        Some(n) => n,
        None => defaults.max_connections,
    };
    Ok(HttpLimits {
        header_timeout: duration(
            args.header_timeout,
            &file.header_timeout,
            "header-timeout",
            defaults.header_timeout,
        )?,
        keep_alive_timeout: duration(
            args.keep_alive_timeout,
            &file.keep_alive_timeout,
            "keep-alive-timeout",
            defaults.keep_alive_timeout,
        )?,
        body_timeout: duration(
            args.body_timeout,
            &file.body_timeout,
            "body-timeout",
            defaults.body_timeout,
        )?,
        write_timeout: duration(
            args.write_timeout,
            &file.write_timeout,
            "write-timeout",
            defaults.write_timeout,
        )?,
        max_connections,
    })
}

/// The gateway is on when a database is given; its other settings need one.
fn gateway_config(
    db: Option<PathBuf>,
    policy: Option<PathBuf>,
    sink: Option<String>,
    redis_url: Option<String>,
) -> Result<Option<GatewayConfig>, ServerError> {
    let Some(db) = db else {
        if policy.is_some() || sink.is_some() || redis_url.is_some() {
            return Err(setting(
                "gateway-db",
                "the gateway settings need --gateway-db (where API keys live)".into(),
            ));
        }
        return Ok(None);
    };
    let mut config = GatewayConfig::new(db);
    config.policy = policy;
    config.redis_url = redis_url;
    if let Some(sink) = sink {
        config.sink =
            SinkSpec::parse(&sink).map_err(|e| setting("metering-sink", e.to_string()))?;
    }
    Ok(Some(config))
}

/// Guardrails are on when a policy file is given; the audit log belongs to them.
fn guard_settings(
    policy: Option<PathBuf>,
    audit_log: Option<PathBuf>,
    audit_key: Option<PathBuf>,
) -> Result<Option<GuardSettings>, ServerError> {
    if audit_key.is_some() && audit_log.is_none() {
        return Err(setting(
            "audit-key",
            "the key signs the audit log; it needs --audit-log".into(),
        ));
    }
    match (policy, audit_log) {
        (Some(policy), audit_log) => Ok(Some(GuardSettings {
            policy,
            audit_log,
            audit_key,
        })),
        (None, Some(_)) => Err(setting(
            "audit-log",
            "the audit log records guardrail decisions; it needs --guard-config".into(),
        )),
        (None, None) => Ok(None),
    }
}

fn setting(field: &'static str, reason: String) -> ServerError {
    ServerError::Setting { field, reason }
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

fn size_bytes(size: Size) -> Result<u64, ServerError> {
    match size {
        Size::Number(n) => Ok(n),
        Size::Text(text) => {
            parse_byte_size(&text).map_err(|reason| setting("kv-cache-memory", reason))
        }
    }
}

fn size_duration(size: Size) -> Result<Duration, ServerError> {
    match size {
        Size::Number(n) => Ok(Duration::from_secs(n)),
        Size::Text(text) => {
            parse_duration(&text).map_err(|reason| setting("drain-timeout", reason))
        }
    }
}

/// Reads the TOML file; keys may use `_` or `-`.
fn read_file(path: &PathBuf) -> Result<FileSettings, ServerError> {
    let fail = |reason: String| ServerError::ConfigFile {
        path: path.clone(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let table: toml::Table = toml::from_str(&text).map_err(|e| fail(e.to_string()))?;
    let table: toml::Table = table
        .into_iter()
        .map(|(k, v)| (k.replace('_', "-"), v))
        .collect();
    toml::Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_config(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("pagoda-server-{name}-{}.toml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let path = write_config("precedence", "model = \"/m\"\nport = 9000\nmax_num_seqs = 8\nkv-cache-memory = \"64MiB\"\ndrain_timeout = \"5s\"\n");
        let args = ServeArgs {
            config: Some(path.clone()),
            port: Some(9100),
            ..ServeArgs::default()
        };
        let settings = Settings::resolve(args).unwrap();
        std::fs::remove_file(path).ok();
        assert_eq!(settings.model, "/m");
        assert_eq!(settings.port, 9100);
        assert_eq!(settings.host, "127.0.0.1");
        assert_eq!(settings.engine.max_num_seqs, 8);
        assert_eq!(settings.engine.kv_cache_memory, 64 << 20);
        assert_eq!(settings.drain_timeout, Duration::from_secs(5));
        assert_eq!(settings.served_model_names, vec!["/m".to_string()]);
    }

    #[test]
    fn quantized_weights_take_their_repack_dot_and_pages_from_flags_or_the_file() {
        let path = write_config(
            "quant",
            "model = \"/m.gguf\"\nquant-dot = \"exact\"\nquant-repack = \"off\"\nquant-pages = \"mapped\"\n",
        );
        let from_file = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(from_file.engine.load.quant_dot, QuantDot::Exact);
        assert_eq!(from_file.engine.load.repack, QuantRepack::Off);
        assert_eq!(from_file.engine.load.pages, QuantPages::Mapped);
        let flagged = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            quant_dot: Some("int8".into()),
            quant_repack: Some("q8_0".into()),
            quant_pages: Some("auto".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        std::fs::remove_file(path).ok();
        assert_eq!(flagged.engine.load.quant_dot, QuantDot::Int8);
        assert_eq!(flagged.engine.load.repack, QuantRepack::Q8_0);
        assert_eq!(flagged.engine.load.pages, QuantPages::Auto);
        let defaults = Settings::resolve(ServeArgs {
            model: Some("/m.gguf".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(defaults.engine.load.quant_dot, QuantDot::Int8);
        assert_eq!(defaults.engine.load.repack, QuantRepack::Auto);
        assert_eq!(defaults.engine.load.pages, QuantPages::Auto);
        for (dot, repack, pages, field) in [
            (Some("int4"), None, None, "quant-dot"),
            (None, Some("q4_0"), None, "quant-repack"),
            (None, None, Some("huge"), "quant-pages"),
        ] {
            let err = Settings::resolve(ServeArgs {
                model: Some("/m.gguf".into()),
                quant_dot: dot.map(Into::into),
                quant_repack: repack.map(Into::into),
                quant_pages: pages.map(Into::into),
                ..ServeArgs::default()
            })
            .expect_err("a bad value is refused");
            assert!(err.to_string().contains(field), "{err}");
        }
    }

    #[test]
    fn kv_events_take_an_endpoint_and_a_topic_naming_the_server() {
        let path = write_config(
            "kv-events",
            "model = \"/m\"\nserved-model-name = \"qwen\"\nhost = \"10.0.0.7\"\nport = 8100\nkv-events-endpoint = \"tcp://*:5557\"\n",
        );
        let args = ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        };
        let kv = Settings::resolve(args).unwrap().kv_events.unwrap();
        assert_eq!(kv.endpoint, "tcp://*:5557");
        assert_eq!(kv.topic, "kv@10.0.0.7:8100@qwen");
        assert_eq!(kv.replay_endpoint, None);
        let args = ServeArgs {
            config: Some(path.clone()),
            kv_events_topic: Some("kv@pod@m".into()),
            kv_events_replay_endpoint: Some("tcp://*:5558".into()),
            ..ServeArgs::default()
        };
        let kv = Settings::resolve(args).unwrap().kv_events.unwrap();
        assert_eq!(kv.topic, "kv@pod@m");
        assert_eq!(kv.replay_endpoint.as_deref(), Some("tcp://*:5558"));
        std::fs::remove_file(path).ok();
        let refused = [
            ServeArgs {
                kv_events_replay_endpoint: Some("tcp://*:5558".into()),
                ..ServeArgs::default()
            },
            ServeArgs {
                kv_events_endpoint: Some("ipc:///tmp/kv".into()),
                ..ServeArgs::default()
            },
        ];
        for args in refused {
            let args = ServeArgs {
                model: Some("/m".into()),
                ..args
            };
            let error = Settings::resolve(args).unwrap_err().to_string();
            assert!(error.contains("kv-events-endpoint"), "{error}");
        }
        assert_eq!(
            Settings::resolve(ServeArgs {
                model: Some("/m".into()),
                ..ServeArgs::default()
            })
            .unwrap()
            .kv_events,
            None
        );
    }

    #[test]
    fn slo_classes_and_the_itl_target_come_from_flags_or_the_file() {
        let path = write_config(
            "slo",
            "model = \"/m\"\ntarget-itl-ms = 250\nslo-class = [\"interactive:ttft=1000,itl=100\", \"batch\"]\ndefault-slo-class = \"batch\"\n",
        );
        let args = ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        };
        let settings = Settings::resolve(args).unwrap();
        assert_eq!(settings.engine.target_itl_ms, Some(250));
        let names: Vec<_> = settings
            .slo_classes
            .iter()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(names, ["batch", "interactive"]);
        let default = settings.slo_classes.resolve(None, None).unwrap();
        assert_eq!(default.name, "batch");
        let args = ServeArgs {
            config: Some(path.clone()),
            target_itl_ms: Some(80),
            slo_class: Some(vec!["fast:itl=50".into()]),
            default_slo_class: Some("fast".into()),
            ..ServeArgs::default()
        };
        let settings = Settings::resolve(args).unwrap();
        assert_eq!(settings.engine.target_itl_ms, Some(80));
        assert_eq!(
            settings.slo_classes.resolve(None, None).unwrap().itl_ms,
            Some(50)
        );
        for (flags, field) in [
            (
                ServeArgs {
                    target_itl_ms: Some(0),
                    ..ServeArgs::default()
                },
                "target-itl-ms",
            ),
            (
                ServeArgs {
                    slo_class: Some(vec!["x:itl=fast".into()]),
                    ..ServeArgs::default()
                },
                "slo-class",
            ),
            (
                ServeArgs {
                    default_slo_class: Some("nope".into()),
                    ..ServeArgs::default()
                },
                "slo-class",
            ),
        ] {
            let args = ServeArgs {
                config: Some(path.clone()),
                ..flags
            };
            match Settings::resolve(args) {
                Err(ServerError::Setting { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        std::fs::remove_file(path).ok();
    }

    #[test]
    fn kv_cache_dtype_comes_from_the_flag_or_the_file_and_is_checked() {
        let path = write_config("kv", "model = \"/m\"\nkv_cache_dtype = \"bfloat16\"\n");
        let from_file = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        let from_flag = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            kv_cache_dtype: Some("float16".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        std::fs::remove_file(path).ok();
        assert_eq!(
            from_file.engine.kv_cache_dtype,
            KvCacheDtype::Fixed(WeightDtype::BF16)
        );
        assert_eq!(
            from_flag.engine.kv_cache_dtype,
            KvCacheDtype::Fixed(WeightDtype::F16)
        );
        let default = Settings::resolve(ServeArgs {
            model: Some("/m".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(default.engine.kv_cache_dtype, KvCacheDtype::Auto);
        let err = Settings::resolve(ServeArgs {
            model: Some("/m".into()),
            kv_cache_dtype: Some("fp8".into()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(err.to_string().contains("fp8"), "{err}");
    }

    #[test]
    fn guardrails_come_from_the_file_or_flags_and_the_audit_log_needs_them() {
        let path = write_config(
            "guard",
            "model = \"/m\"\nguard_config = \"/g.toml\"\naudit-log = \"/a.jsonl\"\n",
        );
        let settings = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        std::fs::remove_file(path).ok();
        let guard = settings.guard.unwrap();
        assert_eq!(guard.policy, PathBuf::from("/g.toml"));
        assert_eq!(guard.audit_log, Some(PathBuf::from("/a.jsonl")));
        let err = Settings::resolve(ServeArgs {
            model: Some("/m".into()),
            audit_log: Some("/a.jsonl".into()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                ServerError::Setting {
                    field: "audit-log",
                    ..
                }
            ),
            "{err}"
        );
        let plain = Settings::resolve(ServeArgs {
            model: Some("/m".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert!(plain.guard.is_none());
    }

    #[test]
    fn the_console_reports_dir_comes_from_the_file_or_the_flag_and_needs_the_gateway() {
        let path = write_config(
            "reports",
            "model = \"/m\"\ngateway_db = \"/gw.db\"\nconsole_reports_dir = \"/r\"\n",
        );
        let from_file = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap();
        let from_flag = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            console_reports_dir: Some("/flag".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        std::fs::remove_file(path).ok();
        assert_eq!(from_file.console_reports_dir, Some(PathBuf::from("/r")));
        assert_eq!(from_flag.console_reports_dir, Some(PathBuf::from("/flag")));
        let err = Settings::resolve(ServeArgs {
            model: Some("/m".into()),
            console_reports_dir: Some("/r".into()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        assert!(
            matches!(
                err,
                ServerError::Setting {
                    field: "console-reports-dir",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn http_limits_come_from_flags_then_the_file_then_defaults() {
        let path = write_config(
            "http",
            "model = \"/m\"\nheader_timeout = \"2s\"\nkeep-alive-timeout = 90\nmax_connections = 7\n",
        );
        let settings = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            body_timeout: Some(Duration::from_millis(1500)),
            header_timeout: Some(Duration::from_secs(3)),
            ..ServeArgs::default()
        })
        .unwrap();
        std::fs::remove_file(path).ok();
        assert_eq!(
            settings.http,
            HttpLimits {
                header_timeout: Duration::from_secs(3),
                keep_alive_timeout: Duration::from_secs(90),
                body_timeout: Duration::from_millis(1500),
                write_timeout: HttpLimits::default().write_timeout,
                max_connections: 7,
            }
        );
        let plain = Settings::resolve(ServeArgs {
            model: Some("/m".into()),
            ..ServeArgs::default()
        })
        .unwrap();
        assert_eq!(plain.http, HttpLimits::default());
        for (args, field) in [
            (
                ServeArgs {
                    max_connections: Some(0),
                    ..ServeArgs::default()
                },
                "max-connections",
            ),
            (
                ServeArgs {
                    write_timeout: Some(Duration::ZERO),
                    ..ServeArgs::default()
                },
                "write-timeout",
            ),
        ] {
            let err = Settings::resolve(ServeArgs {
                model: Some("/m".into()),
                ..args
            })
            .unwrap_err();
            assert!(
                matches!(err, ServerError::Setting { field: f, .. } if f == field),
                "{err}"
            );
        }
        let path = write_config("http-bad", "model = \"/m\"\nbody-timeout = \"forever\"\n");
        let err = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        std::fs::remove_file(path).ok();
        assert!(
            matches!(
                err,
                ServerError::Setting {
                    field: "body-timeout",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_missing_model_and_unknown_keys_are_reported() {
        assert!(matches!(
            Settings::resolve(ServeArgs::default()),
            Err(ServerError::Setting { field: "model", .. })
        ));
        let path = write_config("unknown-key", "modle = \"/m\"\n");
        let err = Settings::resolve(ServeArgs {
            config: Some(path.clone()),
            ..ServeArgs::default()
        })
        .unwrap_err();
        std::fs::remove_file(path).ok();
        assert!(err.to_string().contains("modle"), "{err}");
    }
}
