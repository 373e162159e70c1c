//! Exact summary statistics over collected samples.
//!
//! Benchmarks here collect at most a few million samples, so sorting them gives exact
//! percentiles; tests can then compare against hand-computed values without a histogram's
//! quantisation error.

use serde::{Deserialize, Serialize};

/// Mean, median, tail percentiles and extremes of one latency, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises `samples`; an empty slice gives all zeros with `count == 0`.
    pub fn of(samples: &[f64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Self {
            count: sorted.len(),
            mean: sorted.iter().sum::<f64>() / sorted.len() as f64,
            median: percentile_of_sorted(&sorted, 50.0),
            p90: percentile_of_sorted(&sorted, 90.0),
            p99: percentile_of_sorted(&sorted, 99.0),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        }
    }

    /// Picks one of the reported percentiles by number (50, 90 or 99).
    pub fn at_percentile(&self, percentile: u8) -> Option<f64> {
        match percentile {
            50 => Some(self.median),
            90 => Some(self.p90),
            99 => Some(self.p99),
            _ => None,
        }
    }
}

/// Percentile with linear interpolation between closest ranks (numpy's default), so
/// numbers agree with other tools' reports.
pub fn percentile_of_sorted(sorted: &[f64], percentile: f64) -> f64 {
    assert!(!sorted.is_empty(), "percentile of an empty sample");
    let rank = percentile / 100.0 * (sorted.len() - 1) as f64;
    let lower = rank.floor() as usize;
    let upper = rank.ceil() as usize;
    let weight = rank - lower as f64;
    sorted[lower] + (sorted[upper] - sorted[lower]) * weight
}

/// Points of an empirical CDF, `(value, fraction of samples <= value)`.
pub fn empirical_cdf(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as f64;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, v)| (v, (i + 1) as f64 / n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let samples: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = Summary::of(&samples);
        assert_eq!(s.count, 10);
        assert_eq!(s.mean, 5.5);
        assert_eq!(s.median, 5.5);
        assert!((s.p90 - 9.1).abs() < 1e-12);
        assert!((s.p99 - 9.91).abs() < 1e-12);
        assert_eq!((s.min, s.max), (1.0, 10.0));
    }

    #[test]
    fn summary_ignores_input_order() {
        let a = Summary::of(&[3.0, 1.0, 2.0]);
        let b = Summary::of(&[1.0, 2.0, 3.0]);
        assert_eq!(a, b);
        assert_eq!(a.median, 2.0);
    }

    #[test]
    fn empty_sample_summarises_to_zero_count() {
        assert_eq!(Summary::of(&[]).count, 0);
    }

    #[test]
    fn cdf_ends_at_one() {
        let cdf = empirical_cdf(&[2.0, 1.0]);
        assert_eq!(cdf, vec![(1.0, 0.5), (2.0, 1.0)]);
    }
}
