//! The engine's recent history for the console's live charts: every `EVERY` a sample of the
//! engine's gauges and of rates and latency percentiles over the interval (from counter and
//! histogram differences), the last `KEEP` of them kept.

use std::collections::VecDeque;
use std::time::Duration;

use pagoda_runtime::EngineStats;
use serde::Serialize;

pub const EVERY: Duration = Duration::from_secs(2);
/// Ten minutes of samples.
const KEEP: usize = 300;
/// Percentiles are over this many intervals (30 s), so a quiet interval is not blank.
const LATENCY_WINDOW: usize = 15;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Sample {
    pub t_ms: i64,
    pub running: usize,
    pub waiting: usize,
    pub kv_usage: f64,
    /// Prompt tokens found in the prefix cache over those looked up, this interval.
    pub prefix_hit_rate: Option<f64>,
    pub output_tokens_per_s: f64,
    pub prompt_tokens_per_s: f64,
    pub preemptions: u64,
    pub ttft_p50_s: Option<f64>,
    pub ttft_p99_s: Option<f64>,
    pub itl_p50_s: Option<f64>,
    pub itl_p99_s: Option<f64>,
}

/// Cumulative figures at one instant.
#[derive(Clone)]
struct Reading {
    t_ms: i64,
    stats: EngineStats,
    ttft: Vec<u64>,
    itl: Vec<u64>,
}

#[derive(Default)]
pub struct History {
    samples: VecDeque<Sample>,
    readings: VecDeque<Reading>,
}

/// The `q` quantile of a bucketed distribution (per-bucket counts under `bounds`), linear
/// within its bucket; `None` without observations.
pub fn quantile(bounds: &[f64], counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut seen = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 && (seen + n) as f64 >= rank {
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            let within = (rank - seen as f64) / n as f64;
            return Some(lower + (bounds[i] - lower) * within.clamp(0.0, 1.0));
        }
        seen += n;
    }
    bounds.last().copied()
}

fn minus(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| x.saturating_sub(*y)).collect()
}

impl History {
    /// Takes one reading; from the second on, adds a sample.
    pub fn record(
        &mut self,
        t_ms: i64,
        stats: EngineStats,
        [(ttft_bounds, ttft), (itl_bounds, itl)]: [(&'static [f64], Vec<u64>); 2],
    ) {
        let now = Reading {
            t_ms,
            stats,
            ttft,
            itl,
        };
        if let Some(prev) = self.readings.back() {
            let dt = ((now.t_ms - prev.t_ms) as f64 / 1e3).max(1e-3);
            let (s, p) = (&now.stats, &prev.stats);
            let queried = s.prefix_cache_queried_tokens - p.prefix_cache_queried_tokens;
            let hits = s.prefix_cache_hit_tokens - p.prefix_cache_hit_tokens;
            let base = &self.readings[self.readings.len().saturating_sub(LATENCY_WINDOW)];
            let ttft_d = minus(&now.ttft, &base.ttft);
            let itl_d = minus(&now.itl, &base.itl);
            self.samples.push_back(Sample {
                t_ms,
                running: s.num_running,
                waiting: s.num_waiting,
                kv_usage: s.kv_usage(),
                prefix_hit_rate: (queried > 0).then(|| hits as f64 / queried as f64),
                output_tokens_per_s: (s.generation_tokens_total - p.generation_tokens_total) as f64
                    / dt,
                prompt_tokens_per_s: (s.prompt_tokens_total - p.prompt_tokens_total) as f64 / dt,
                preemptions: s.preemptions_total - p.preemptions_total,
                ttft_p50_s: quantile(ttft_bounds, &ttft_d, 0.5),
                ttft_p99_s: quantile(ttft_bounds, &ttft_d, 0.99),
                itl_p50_s: quantile(itl_bounds, &itl_d, 0.5),
                itl_p99_s: quantile(itl_bounds, &itl_d, 0.99),
            });
            if self.samples.len() > KEEP {
                self.samples.pop_front();
            }
        }
        self.readings.push_back(now);
        if self.readings.len() > LATENCY_WINDOW + 1 {
            self.readings.pop_front();
        }
    }

    pub fn samples(&self) -> Vec<Sample> {
        self.samples.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: &[f64] = &[0.1, 0.5, 1.0];

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn quantiles_interpolate_within_buckets() {
        assert_eq!(quantile(BOUNDS, &[0, 0, 0], 0.5), None);
        // 10 in (0, 0.1], 10 in (0.5, 1.0]: the median is the top of the first bucket.
        assert!(close(quantile(BOUNDS, &[10, 0, 10], 0.5), 0.1));
        assert!(close(quantile(BOUNDS, &[10, 0, 10], 0.99), 0.99));
        assert!(close(quantile(BOUNDS, &[0, 4, 0], 0.25), 0.2));
    }

    fn stats(generated: u64, queried: u64, hits: u64) -> EngineStats {
        EngineStats {
            generation_tokens_total: generated,
            prefix_cache_queried_tokens: queried,
            prefix_cache_hit_tokens: hits,
            num_running: 3,
            ..EngineStats::default()
        }
    }

    #[test]
    fn samples_are_rates_and_windowed_percentiles() {
        let mut h = History::default();
        h.record(
            0,
            stats(0, 0, 0),
            [(BOUNDS, vec![0; 3]), (BOUNDS, vec![0; 3])],
        );
        assert!(h.samples().is_empty());
        h.record(
            2000,
            stats(100, 40, 10),
            [(BOUNDS, vec![0, 2, 0]), (BOUNDS, vec![5, 0, 0])],
        );
        let s = &h.samples()[0];
        assert_eq!(s.output_tokens_per_s, 50.0);
        assert_eq!(s.prefix_hit_rate, Some(0.25));
        assert_eq!(s.running, 3);
        assert!(close(s.ttft_p50_s, 0.3), "{s:?}");
        assert!(close(s.itl_p99_s, 0.099), "{s:?}");
        for i in 2..400 {
            h.record(
                i * 2000,
                stats(100, 40, 10),
                [(BOUNDS, vec![0, 2, 0]), (BOUNDS, vec![5, 0, 0])],
            );
        }
        let samples = h.samples();
        assert_eq!(samples.len(), KEEP);
        // Nothing new for longer than the window: no percentile, zero rate.
        let last = samples.last().unwrap();
        assert_eq!((last.ttft_p50_s, last.output_tokens_per_s), (None, 0.0));
    }
}
