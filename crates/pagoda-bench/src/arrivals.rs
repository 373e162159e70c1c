//! When requests are sent: a fixed number in flight, or a seeded Poisson process.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The offered load of one benchmark run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// Keep this many requests in flight; a new one starts as soon as one finishes.
    Concurrency(u32),
    /// Open-loop Poisson arrivals at this many requests per second.
    PoissonRate(f64),
}

impl Load {
    /// The number used as x coordinate when plotting a sweep.
    pub fn level(&self) -> f64 {
        match self {
            Load::Concurrency(c) => f64::from(*c),
            Load::PoissonRate(r) => *r,
        }
    }
}

impl std::fmt::Display for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Load::Concurrency(c) => write!(f, "concurrency {c}"),
            Load::PoissonRate(r) => write!(f, "{r} req/s (Poisson)"),
        }
    }
}

/// Gaps between Poisson arrivals: exponentially distributed with mean `1 / rate`.
/// The same seed always yields the same gaps, so runs can be repeated exactly.
pub struct PoissonGaps {
    rng: StdRng,
    exp: Exp<f64>,
}

impl PoissonGaps {
    /// `rate` must be positive and finite (checked by the CLI before this is built).
    pub fn new(rate_per_s: f64, seed: u64) -> Self {
        let exp = Exp::new(rate_per_s).expect("Poisson rate must be positive and finite");
        Self {
            rng: StdRng::seed_from_u64(seed),
            exp,
        }
    }
}

impl Iterator for PoissonGaps {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_secs_f64(self.exp.sample(&mut self.rng)))
    }
}

/// Send times of the first `count` Poisson arrivals, measured from the start of the run.
pub fn poisson_arrival_offsets(rate_per_s: f64, seed: u64, count: usize) -> Vec<Duration> {
    PoissonGaps::new(rate_per_s, seed)
        .take(count)
        .scan(Duration::ZERO, |at, gap| {
            *at += gap;
            Some(*at)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_the_same_arrivals() {
        assert_eq!(
            poisson_arrival_offsets(50.0, 7, 100),
            poisson_arrival_offsets(50.0, 7, 100)
        );
        assert_ne!(
            poisson_arrival_offsets(50.0, 7, 100),
            poisson_arrival_offsets(50.0, 8, 100)
        );
    }

    #[test]
    fn mean_arrival_rate_matches_the_requested_rate() {
        let count = 50_000;
        let offsets = poisson_arrival_offsets(200.0, 42, count);
        let observed_rate = count as f64 / offsets.last().unwrap().as_secs_f64();
        assert!(
            (observed_rate - 200.0).abs() < 200.0 * 0.02,
            "observed {observed_rate}"
        );
    }

    #[test]
    fn arrivals_are_increasing() {
        let offsets = poisson_arrival_offsets(10.0, 1, 1000);
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
    }
}
