//! The rate search of `bench profile --slo-ttft-ms X --slo-itl-ms Y`: the highest Poisson
//! request rate at which enough of the requests meet both latency limits.
//!
//! The search only sees attainment per rate, through a `measure` callback, so it can be
//! tested against a made-up attainment curve; `goodput_profile` measures against a server.

use crate::cli::ProfileArgs;
use crate::error::BenchError;
use serde::{Deserialize, Serialize};

pub const DEFAULT_ATTAINMENT: f64 = 0.9;
pub const DEFAULT_RATE_MIN: f64 = 1.0;
pub const DEFAULT_STEPS: u32 = 5;
/// Twenty halvings narrow any bracket a million times; more only adds noise and time.
pub const MAX_STEPS: u32 = 20;
/// Without `--rate-max`, the rate is doubled at most this often (up to 1024 x `--rate-min`).
pub const MAX_DOUBLINGS: u32 = 10;

/// The validated goodput-search arguments.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    pub slo_ttft_ms: f64,
    /// Limit on each request's time per output token (the TPOT of `bench serve`'s goodput).
    pub slo_itl_ms: f64,
    /// Fraction of the measured requests that must meet both limits.
    pub attainment: f64,
    pub rate_min: f64,
    pub rate_max: Option<f64>,
    pub steps: u32,
}

fn invalid(message: impl Into<String>) -> BenchError {
    BenchError::InvalidArgument(message.into())
}

fn positive(flag: &str, value: f64) -> Result<f64, BenchError> {
    if value > 0.0 && value.is_finite() {
        Ok(value)
    } else {
        Err(invalid(format!(
            "{flag} must be a positive number, got {value}"
        )))
    }
}

impl SearchConfig {
    /// `None` without SLO flags: the plain profile runs. Search-only flags without both
    /// SLO flags are refused rather than silently ignored.
    pub fn from_args(args: &ProfileArgs) -> Result<Option<Self>, BenchError> {
        let (slo_ttft_ms, slo_itl_ms) = match (args.slo_ttft_ms, args.slo_itl_ms) {
            (Some(ttft), Some(itl)) => (ttft, itl),
            (Some(_), None) => {
                return Err(invalid(
                    "--slo-ttft-ms needs --slo-itl-ms too: the goodput search checks both",
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "--slo-itl-ms needs --slo-ttft-ms too: the goodput search checks both",
                ))
            }
            (None, None) => {
                let search_only = [
                    ("--slo-attainment", args.slo_attainment.is_some()),
                    ("--rate-min", args.rate_min.is_some()),
                    ("--rate-max", args.rate_max.is_some()),
                    ("--search-steps", args.search_steps.is_some()),
                ];
                return match search_only.iter().find(|(_, given)| *given) {
                    Some((flag, _)) => Err(invalid(format!(
                        "{flag} belongs to the goodput search: give --slo-ttft-ms and --slo-itl-ms too"
                    ))),
                    None => Ok(None),
                };
            }
        };
        let config = SearchConfig {
            slo_ttft_ms: positive("--slo-ttft-ms", slo_ttft_ms)?,
            slo_itl_ms: positive("--slo-itl-ms", slo_itl_ms)?,
            attainment: args.slo_attainment.unwrap_or(DEFAULT_ATTAINMENT),
            rate_min: positive("--rate-min", args.rate_min.unwrap_or(DEFAULT_RATE_MIN))?,
            rate_max: args
                .rate_max
                .map(|max| positive("--rate-max", max))
                .transpose()?,
            steps: args.search_steps.unwrap_or(DEFAULT_STEPS),
        };
        if !(config.attainment > 0.0 && config.attainment <= 1.0) {
            return Err(invalid(format!(
                "--slo-attainment must be in (0, 1], got {}",
                config.attainment
            )));
        }
        if let Some(max) = config.rate_max {
            if max <= config.rate_min {
                return Err(invalid(format!(
                    "--rate-max ({max}) must be above --rate-min ({})",
                    config.rate_min
                )));
            }
        }
        if config.steps > MAX_STEPS {
            return Err(invalid(format!(
                "--search-steps must be at most {MAX_STEPS}, got {}",
                config.steps
            )));
        }
        if args.num_requests == 0 {
            return Err(invalid("--num-requests must be at least 1"));
        }
        if args.input_len == 0 || args.output_len == 0 {
            return Err(invalid("--input-len and --output-len must be at least 1"));
        }
        Ok(Some(config))
    }

    pub fn is_met(&self, attainment: f64) -> bool {
        attainment >= self.attainment
    }
}

/// One measured rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatePoint<P> {
    /// Offered Poisson rate, requests/s.
    pub rate: f64,
    pub attainment: f64,
    pub meets_slo: bool,
    /// What was measured there.
    pub run: P,
}

/// Every rate the search measured and where it ended.
#[derive(Debug, Clone)]
pub struct Search<P> {
    /// In the order measured.
    pub points: Vec<RatePoint<P>>,
    /// Index in `points` of the answer: the highest rate met below the lowest rate missed.
    pub best: usize,
    /// Index of the lowest rate missed above the answer; `None` if every rate tried met
    /// the SLO, so the answer is only a lower bound.
    pub first_miss: Option<usize>,
}

impl<P> Search<P> {
    pub fn best(&self) -> &RatePoint<P> {
        &self.points[self.best]
    }

    pub fn first_miss(&self) -> Option<&RatePoint<P>> {
        self.first_miss.map(|i| &self.points[i])
    }

    /// The points in increasing rate, for tables and plots.
    pub fn by_rate(&self) -> Vec<&RatePoint<P>> {
        let mut points: Vec<&RatePoint<P>> = self.points.iter().collect();
        points.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        points
    }
}

/// Finds the highest rate meeting `config`: `--rate-min` must meet it; the upper bound is
/// `--rate-max` or the first miss while doubling from `--rate-min`; then `config.steps`
/// bisections between the last rate met and the first missed. Attainment is assumed to
/// fall with the rate; the answer is always a rate that was measured to meet the SLO.
pub fn search<P>(
    config: &SearchConfig,
    mut measure: impl FnMut(f64) -> Result<P, BenchError>,
    attainment_of: impl Fn(&P) -> f64,
) -> Result<Search<P>, BenchError> {
    let mut points: Vec<RatePoint<P>> = Vec::new();
    let mut probe = |rate: f64, points: &mut Vec<RatePoint<P>>| -> Result<usize, BenchError> {
        let run = measure(rate)?;
        let attainment = attainment_of(&run);
        points.push(RatePoint {
            rate,
            attainment,
            meets_slo: config.is_met(attainment),
            run,
        });
        Ok(points.len() - 1)
    };

    let mut best = probe(config.rate_min, &mut points)?;
    if !points[best].meets_slo {
        return Err(BenchError::GoodputUnreachable {
            slo_ttft_ms: config.slo_ttft_ms,
            slo_itl_ms: config.slo_itl_ms,
            target: config.attainment,
            rate: config.rate_min,
            attainment: points[best].attainment,
        });
    }
    let mut miss = None;
    match config.rate_max {
        Some(max) => {
            let i = probe(max, &mut points)?;
            if points[i].meets_slo {
                best = i;
            } else {
                miss = Some(i);
            }
        }
        None => {
            let mut rate = config.rate_min;
            for _ in 0..MAX_DOUBLINGS {
                rate *= 2.0;
                let i = probe(rate, &mut points)?;
                if points[i].meets_slo {
                    best = i;
                } else {
                    miss = Some(i);
                    break;
                }
            }
        }
    }
    if let Some(mut high) = miss {
        for _ in 0..config.steps {
            let mid = (points[best].rate + points[high].rate) / 2.0;
            let i = probe(mid, &mut points)?;
            if points[i].meets_slo {
                best = i;
            } else {
                high = i;
            }
        }
        miss = Some(high);
    }
    Ok(Search {
        points,
        best,
        first_miss: miss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: ProfileArgs,
    }

    fn config_of(flags: &[&str]) -> Result<Option<SearchConfig>, BenchError> {
        let mut argv = vec!["profile"];
        argv.extend_from_slice(flags);
        SearchConfig::from_args(&Wrapper::parse_from(argv).args)
    }

    fn config(rate_min: f64, rate_max: Option<f64>, steps: u32) -> SearchConfig {
        SearchConfig {
            slo_ttft_ms: 100.0,
            slo_itl_ms: 10.0,
            attainment: 0.9,
            rate_min,
            rate_max,
            steps,
        }
    }

    /// Attainment falling smoothly with the rate; 0.9 is crossed at 50 / 9^(1/4) ~ 28.87.
    fn curve(rate: f64) -> f64 {
        1.0 / (1.0 + (rate / 50.0).powi(4))
    }

    fn crossing() -> f64 {
        50.0 / 9f64.powf(0.25)
    }

    fn run(config: &SearchConfig, f: impl Fn(f64) -> f64) -> Result<Search<f64>, BenchError> {
        search(config, |rate| Ok(f(rate)), |a| *a)
    }

    #[test]
    fn doubling_then_bisection_brackets_the_crossing() {
        // Doubling from 1: 2, 4, 8, 16 met, 32 missed; five halvings of [16, 32].
        let found = run(&config(1.0, None, 5), curve).unwrap();
        let (best, miss) = (found.best().rate, found.first_miss().unwrap().rate);
        assert!(best <= crossing() && crossing() < miss, "{best} .. {miss}");
        assert!(miss - best <= 16.0 / 32.0 + 1e-12, "{best} .. {miss}");
        assert!(found.best().attainment >= 0.9);
        assert_eq!(found.points.len(), 6 + 5);
    }

    #[test]
    fn rate_max_bounds_the_search() {
        let found = run(&config(1.0, Some(100.0), 10), curve).unwrap();
        let (best, miss) = (found.best().rate, found.first_miss().unwrap().rate);
        assert!(best <= crossing() && crossing() < miss, "{best} .. {miss}");
        assert!(miss - best <= 99.0 / 1024.0 + 1e-12);
        // Lowest rate, --rate-max, then one point per step.
        assert_eq!(found.points.len(), 2 + 10);
        assert_eq!(found.points[1].rate, 100.0);
        assert!(!found.points[1].meets_slo);
    }

    #[test]
    fn every_point_is_kept_and_judged_against_the_target() {
        let found = run(&config(1.0, Some(100.0), 4), curve).unwrap();
        for point in &found.points {
            assert_eq!(point.meets_slo, point.attainment >= 0.9);
            assert_eq!(point.attainment, curve(point.rate));
        }
        let rates: Vec<f64> = found.by_rate().iter().map(|p| p.rate).collect();
        assert!(rates.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn missing_the_slo_at_the_lowest_rate_is_an_error() {
        let mut measured = Vec::new();
        let error = search(
            &config(2.0, Some(64.0), 5),
            |rate| {
                measured.push(rate);
                Ok(0.5)
            },
            |a| *a,
        )
        .unwrap_err();
        assert!(
            matches!(error, BenchError::GoodputUnreachable { rate, attainment, .. }
                if rate == 2.0 && attainment == 0.5),
            "{error}"
        );
        assert!(error.to_string().contains("lowest rate"), "{error}");
        assert_eq!(measured, vec![2.0], "nothing above a failing lowest rate");
    }

    #[test]
    fn meeting_the_slo_everywhere_gives_a_lower_bound() {
        let bounded = run(&config(1.0, Some(50.0), 5), |_| 1.0).unwrap();
        assert_eq!(bounded.best().rate, 50.0);
        assert!(bounded.first_miss().is_none());
        assert_eq!(bounded.points.len(), 2);

        let doubled = run(&config(1.0, None, 5), |_| 1.0).unwrap();
        assert_eq!(doubled.best().rate, f64::from(1u32 << MAX_DOUBLINGS));
        assert_eq!(doubled.points.len(), MAX_DOUBLINGS as usize + 1);
    }

    #[test]
    fn zero_steps_measures_only_the_bounds() {
        let found = run(&config(10.0, Some(40.0), 0), curve).unwrap();
        assert_eq!(found.points.len(), 2);
        assert_eq!(found.best().rate, 10.0);
        assert_eq!(found.first_miss().unwrap().rate, 40.0);
    }

    #[test]
    fn measurement_errors_stop_the_search() {
        let error = search(
            &config(1.0, None, 5),
            |rate| {
                if rate > 3.0 {
                    Err(BenchError::InvalidArgument("boom".into()))
                } else {
                    Ok(1.0)
                }
            },
            |a: &f64| *a,
        )
        .unwrap_err();
        assert!(error.to_string().contains("boom"));
    }

    #[test]
    fn no_slo_flags_means_the_plain_profile() {
        assert_eq!(config_of(&[]).unwrap(), None);
    }

    #[test]
    fn both_slo_flags_give_the_defaults() {
        let c = config_of(&["--slo-ttft-ms", "300", "--slo-itl-ms", "30"])
            .unwrap()
            .unwrap();
        assert_eq!(
            c,
            SearchConfig {
                slo_ttft_ms: 300.0,
                slo_itl_ms: 30.0,
                attainment: DEFAULT_ATTAINMENT,
                rate_min: DEFAULT_RATE_MIN,
                rate_max: None,
                steps: DEFAULT_STEPS,
            }
        );
        let full = config_of(&[
            "--slo-ttft-ms",
            "300",
            "--slo-itl-ms",
            "30",
            "--slo-attainment",
            "1",
            "--rate-min",
            "0.5",
            "--rate-max",
            "40",
            "--search-steps",
            "20",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (full.attainment, full.rate_min, full.rate_max, full.steps),
            (1.0, 0.5, Some(40.0), 20)
        );
    }

    #[test]
    fn invalid_search_arguments_are_refused_with_one_line() {
        let slo = ["--slo-ttft-ms", "300", "--slo-itl-ms", "30"];
        let cases: &[(&[&str], &str)] = &[
            (
                &["--slo-ttft-ms", "300"],
                "--slo-ttft-ms needs --slo-itl-ms",
            ),
            (&["--slo-itl-ms", "30"], "--slo-itl-ms needs --slo-ttft-ms"),
            (
                &["--rate-max", "10"],
                "--rate-max belongs to the goodput search",
            ),
            (&["--slo-attainment", "0.9"], "--slo-attainment belongs"),
            (
                &["--slo-ttft-ms", "0", "--slo-itl-ms", "30"],
                "--slo-ttft-ms must be a positive",
            ),
            (
                &["--slo-ttft-ms", "300", "--slo-itl-ms", "inf"],
                "--slo-itl-ms must be a positive",
            ),
            (&["--slo-attainment", "0"], "(0, 1]"),
            (&["--slo-attainment", "1.5"], "(0, 1]"),
            (&["--slo-attainment", "NaN"], "(0, 1]"),
            (&["--rate-min=-1"], "--rate-min must be a positive"),
            (&["--rate-min", "NaN"], "--rate-min must be a positive"),
            (&["--rate-max", "0"], "--rate-max must be a positive"),
            (
                &["--rate-min", "5", "--rate-max", "5"],
                "must be above --rate-min",
            ),
            (&["--rate-max", "0.5"], "must be above --rate-min"),
            (&["--search-steps", "21"], "at most 20"),
            (&["--num-requests", "0"], "--num-requests"),
            (&["--output-len", "0"], "--output-len"),
        ];
        for (flags, expected) in cases {
            let mut argv: Vec<&str> = Vec::new();
            // Cases naming an SLO flag stand alone; the rest get both SLO flags.
            if !flags
                .iter()
                .any(|f| f.starts_with("--slo-ttft") || f.starts_with("--slo-itl"))
                && !expected.contains("belongs")
            {
                argv.extend_from_slice(&slo);
            }
            argv.extend_from_slice(flags);
            let message = config_of(&argv).unwrap_err().to_string();
            assert!(message.contains(expected), "{flags:?}: {message}");
            assert!(!message.contains('\n'), "{flags:?}: {message}");
        }
    }
}
