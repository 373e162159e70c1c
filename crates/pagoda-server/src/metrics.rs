//! Prometheus metrics in the text exposition format, written by hand: a few histograms and
//! counters the server feeds, plus the engine's own figures read at scrape time. Names follow
//! vLLM's with a `pagoda:` prefix where the meaning is the same, so dashboards port.

use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use pagoda_runtime::EngineStats;

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
    7.5, 10.0, 20.0, 40.0, 80.0,
];
const REQUEST_BUCKETS: &[f64] = &[
    0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
    60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
];
const TOKEN_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0,
    50000.0, 100000.0,
];

/// A cumulative histogram with fixed upper bounds.
struct Histogram {
    bounds: &'static [f64],
    data: Mutex<HistogramData>,
}

#[derive(Clone)]
struct HistogramData {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            data: Mutex::new(HistogramData {
                counts: vec![0; bounds.len()],
                sum: 0.0,
                count: 0,
            }),
        }
    }

    fn observe(&self, value: f64) {
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = self.bounds.iter().position(|&b| value <= b) {
            data.counts[i] += 1;
        }
        data.sum += value;
        data.count += 1;
    }

    fn snapshot(&self) -> HistogramData {
        self.data.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How requests ended, for `pagoda:request_success_total{finished_reason}`.
#[derive(Default, Clone, Copy)]
struct Finished {
    stop: u64,
    length: u64,
    abort: u64,
}

/// The server's metrics. Cheap to feed from many request tasks at once.
pub struct Metrics {
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    queue: Histogram,
    prompt_tokens: Histogram,
    generation_tokens: Histogram,
    finished: Mutex<Finished>,
    vllm_compat: std::sync::atomic::AtomicBool,
    /// Attainment per SLO class.
    pub slo: crate::slo_metrics::SloCounters,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(REQUEST_BUCKETS),
            queue: Histogram::new(REQUEST_BUCKETS),
            prompt_tokens: Histogram::new(TOKEN_BUCKETS),
            generation_tokens: Histogram::new(TOKEN_BUCKETS),
            finished: Mutex::new(Finished::default()),
            vllm_compat: std::sync::atomic::AtomicBool::new(false),
            slo: Default::default(),
        }
    }

    /// The gap between two outputs of one sequence, spread over the tokens the later brought.
    pub fn observe_inter_token(&self, gap: Duration, tokens: usize) {
        let per_token = gap.as_secs_f64() / tokens.max(1) as f64;
        for _ in 0..tokens {
            self.itl.observe(per_token);
        }
    }

    /// One finished sequence (choice), from the engine's completion record.
    pub fn observe_finished(&self, completion: &pagoda_runtime::Completion) {
        let t = &completion.timings;
        if let Some(first) = t.first_token {
            self.ttft.observe(first.as_secs_f64());
        }
        self.e2e.observe(t.finished.as_secs_f64());
        self.queue.observe(t.queued.as_secs_f64());
        self.prompt_tokens
            .observe(completion.usage.prompt_tokens as f64);
        self.generation_tokens
            .observe(completion.usage.completion_tokens as f64);
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        match completion.finish_reason {
            pagoda_runtime::FinishReason::Stop => finished.stop += 1,
            pagoda_runtime::FinishReason::Length => finished.length += 1,
            pagoda_runtime::FinishReason::Abort => finished.abort += 1,
        }
    }

    /// Per-bucket counts (not cumulative) of time to first token and inter-token latency,
    /// with their upper bounds in seconds, for the console's recent percentiles.
    pub(crate) fn latency_buckets(&self) -> [(&'static [f64], Vec<u64>); 2] {
        [&self.ttft, &self.itl].map(|h| (h.bounds, h.snapshot().counts))
    }

    /// A sequence dropped before it finished (client gone).
    pub fn observe_aborted(&self, sequences: usize) {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .abort += sequences as u64;
    }

    /// Also publish the vLLM names cluster pickers scrape (`--metrics-compat vllm`).
    pub fn set_vllm_compat(&self, on: bool) {
        self.vllm_compat
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// The exposition text; engine gauges and counters only once the engine is loaded
    /// (`block_size` with them, for the vLLM cache-config series).
    pub fn render(
        &self,
        model_name: &str,
        engine: Option<&EngineStats>,
        block_size: Option<usize>,
    ) -> String {
        let label = format!("model_name=\"{}\"", escape_label(model_name));
        let mut out = String::with_capacity(8192);
        if let (Some(s), Some(block_size), true) = (
            engine,
            block_size,
            self.vllm_compat.load(std::sync::atomic::Ordering::Relaxed),
        ) {
            vllm_series(&mut out, &label, s, block_size);
        }
        if let Some(s) = engine {
            gauge(
                &mut out,
                "pagoda:num_requests_running",
                "Sequences running in the engine.",
                &label,
                s.num_running as f64,
            );
            gauge(
                &mut out,
                "pagoda:num_requests_waiting",
                "Sequences waiting to be scheduled.",
                &label,
                s.num_waiting as f64,
            );
            gauge(
                &mut out,
                "pagoda:kv_cache_usage_perc",
                "Fraction of KV-cache blocks in use (1 = full).",
                &label,
                s.kv_usage(),
            );
            gauge(
                &mut out,
                "pagoda:kv_cache_blocks_total",
                "KV-cache blocks.",
                &label,
                s.num_blocks as f64,
            );
            gauge(
                &mut out,
                "pagoda:kv_cache_blocks_used",
                "KV-cache blocks held by requests.",
                &label,
                s.num_used_blocks() as f64,
            );
            counter(
                &mut out,
                "pagoda:prefix_cache_queries",
                "Prompt tokens looked up in the prefix cache.",
                &label,
                s.prefix_cache_queried_tokens as f64,
            );
            counter(
                &mut out,
                "pagoda:prefix_cache_hits",
                "Prompt tokens found in the prefix cache.",
                &label,
                s.prefix_cache_hit_tokens as f64,
            );
            counter(
                &mut out,
                "pagoda:num_preemptions",
                "Preemptions (a running sequence gave its blocks back).",
                &label,
                s.preemptions_total as f64,
            );
            counter(
                &mut out,
                "pagoda:prompt_tokens",
                "Prompt tokens prefilled.",
                &label,
                s.prompt_tokens_total as f64,
            );
            counter(
                &mut out,
                "pagoda:generation_tokens",
                "Tokens generated.",
                &label,
                s.generation_tokens_total as f64,
            );
            counter(
                &mut out,
                "pagoda:engine_steps",
                "Engine steps run.",
                &label,
                s.steps_total as f64,
            );
            counter(
                &mut out,
                "pagoda:constraint_masks",
                "Token masks computed for constrained outputs (structured outputs, forced tool calls).",
                &label,
                s.constraint_masks_total as f64,
            );
            counter(
                &mut out,
                "pagoda:constraint_mask_seconds",
                "Time spent computing those masks (on a worker, alongside the forward pass).",
                &label,
                s.constraint_mask_time_total.as_secs_f64(),
            );
            if let Some(cost) = &s.step_cost {
                header(
                    &mut out,
                    "pagoda:step_cost_seconds",
                    "The fitted step-time model steps are sized with under a latency target: a step takes base + per_token x tokens + per_sampled x rows sampled + per_attended x keys attended.",
                    "gauge",
                );
                for (term, ms) in [
                    ("base", cost.base_ms),
                    ("per_token", cost.per_token_ms),
                    ("per_sampled", cost.per_sampled_ms),
                    ("per_attended", cost.per_attended_ms),
                ] {
                    let _ = writeln!(
                        out,
                        "pagoda:step_cost_seconds{{{label},term=\"{term}\"}} {}",
                        number(ms / 1e3)
                    );
                }
            }
        }
        let finished = *self.finished.lock().unwrap_or_else(|e| e.into_inner());
        header(
            &mut out,
            "pagoda:request_success",
            "Sequences finished, by reason.",
            "counter",
        );
        for (reason, value) in [
            ("stop", finished.stop),
            ("length", finished.length),
            ("abort", finished.abort),
        ] {
            let _ = writeln!(
                out,
                "pagoda:request_success_total{{{label},finished_reason=\"{reason}\"}} {value}"
            );
        }
        histogram(
            &mut out,
            "pagoda:time_to_first_token_seconds",
            "Time from arrival to the first token.",
            &label,
            &self.ttft,
        );
        histogram(
            &mut out,
            "pagoda:inter_token_latency_seconds",
            "Time between tokens of a sequence.",
            &label,
            &self.itl,
        );
        histogram(
            &mut out,
            "pagoda:e2e_request_latency_seconds",
            "Time from arrival to the last token.",
            &label,
            &self.e2e,
        );
        histogram(
            &mut out,
            "pagoda:request_queue_time_seconds",
            "Time waiting before first scheduled.",
            &label,
            &self.queue,
        );
        histogram(
            &mut out,
            "pagoda:request_prompt_tokens",
            "Prompt tokens per finished sequence.",
            &label,
            &self.prompt_tokens,
        );
        histogram(
            &mut out,
            "pagoda:request_generation_tokens",
            "Generated tokens per finished sequence.",
            &label,
            &self.generation_tokens,
        );
        self.slo.render(&mut out, &label);
        out
    }
}

/// The series llm-d's Endpoint Picker and vLLM's production-stack router read by default,
/// under vLLM's names and units (usage as a 0-1 fraction, like ours).
fn vllm_series(out: &mut String, label: &str, s: &EngineStats, block_size: usize) {
    gauge(
        out,
        "vllm:num_requests_running",
        "Sequences running in the engine.",
        label,
        s.num_running as f64,
    );
    gauge(
        out,
        "vllm:num_requests_waiting",
        "Sequences waiting to be scheduled.",
        label,
        s.num_waiting as f64,
    );
    gauge(
        out,
        "vllm:kv_cache_usage_perc",
        "Fraction of KV-cache blocks in use (1 = full).",
        label,
        s.kv_usage(),
    );
    counter(
        out,
        "vllm:prefix_cache_queries",
        "Prompt tokens looked up in the prefix cache.",
        label,
        s.prefix_cache_queried_tokens as f64,
    );
    counter(
        out,
        "vllm:prefix_cache_hits",
        "Prompt tokens found in the prefix cache.",
        label,
        s.prefix_cache_hit_tokens as f64,
    );
    header(
        out,
        "vllm:cache_config_info",
        "KV-cache configuration (the value is 1).",
        "gauge",
    );
    let _ = writeln!(
        out,
        "vllm:cache_config_info{{{label},block_size=\"{block_size}\",num_gpu_blocks=\"{}\"}} 1",
        s.num_blocks
    );
}

pub(crate) fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, label: &str, value: f64) {
    header(out, name, help, "gauge");
    let _ = writeln!(out, "{name}{{{label}}} {}", number(value));
}

fn counter(out: &mut String, name: &str, help: &str, label: &str, value: f64) {
    header(out, name, help, "counter");
    let _ = writeln!(out, "{name}_total{{{label}}} {}", number(value));
}

fn histogram(out: &mut String, name: &str, help: &str, label: &str, h: &Histogram) {
    header(out, name, help, "histogram");
    let data = h.snapshot();
    let mut cumulative = 0;
    for (bound, count) in h.bounds.iter().zip(&data.counts) {
        cumulative += count;
        let _ = writeln!(
            out,
            "{name}_bucket{{{label},le=\"{}\"}} {cumulative}",
            number(*bound)
        );
    }
    let _ = writeln!(out, "{name}_bucket{{{label},le=\"+Inf\"}} {}", data.count);
    let _ = writeln!(out, "{name}_sum{{{label}}} {}", number(data.sum));
    let _ = writeln!(out, "{name}_count{{{label}}} {}", data.count);
}

pub(crate) fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_end_with_inf() {
        let m = Metrics::new();
        m.observe_inter_token(Duration::from_millis(30), 3);
        let text = m.render("m", None, None);
        assert!(
            text.contains(
                "pagoda:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"0.01\"} 3"
            ),
            "{text}"
        );
        assert!(text
            .contains("pagoda:inter_token_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 3"));
        assert!(text.contains("pagoda:inter_token_latency_seconds_count{model_name=\"m\"} 3"));
        assert!(text.contains(
            "pagoda:request_success_total{model_name=\"m\",finished_reason=\"abort\"} 0"
        ));
    }

    #[test]
    fn engine_figures_appear_once_loaded() {
        let stats = EngineStats {
            num_blocks: 10,
            num_free_blocks: 7,
            prompt_tokens_total: 42,
            ..EngineStats::default()
        };
        let text = Metrics::new().render("m", Some(&stats), Some(16));
        assert!(text.contains("# TYPE pagoda:prompt_tokens counter\n"));
        assert!(text.contains("pagoda:prompt_tokens_total{model_name=\"m\"} 42.0"));
        assert!(text.contains("pagoda:kv_cache_blocks_used{model_name=\"m\"} 3.0"));
        assert!(
            !text.contains("vllm:"),
            "vLLM names without --metrics-compat"
        );
    }

    #[test]
    fn vllm_compat_adds_the_series_pickers_scrape() {
        let stats = EngineStats {
            num_blocks: 10,
            num_free_blocks: 6,
            num_running: 3,
            num_waiting: 2,
            prefix_cache_queried_tokens: 100,
            prefix_cache_hit_tokens: 40,
            ..EngineStats::default()
        };
        let m = Metrics::new();
        m.set_vllm_compat(true);
        let text = m.render("m", Some(&stats), Some(16));
        for line in [
            "vllm:num_requests_running{model_name=\"m\"} 3.0",
            "vllm:num_requests_waiting{model_name=\"m\"} 2.0",
            "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.4",
            "vllm:prefix_cache_queries_total{model_name=\"m\"} 100.0",
            "vllm:prefix_cache_hits_total{model_name=\"m\"} 40.0",
            "vllm:cache_config_info{model_name=\"m\",block_size=\"16\",num_gpu_blocks=\"10\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        // The native names stay.
        assert!(text.contains("pagoda:num_requests_waiting{model_name=\"m\"} 2.0"));
    }
}
