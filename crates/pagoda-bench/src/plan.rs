//! Capacity planning from measured throughput (`pagoda plan`).
//!
//! All arithmetic is in decimal so that the published example comes out exact (180 and 375
//! accelerators, not 181 after a binary rounding error) and money is never a float.

use crate::error::BenchError;
use crate::profile_format::ProfileLoad;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The traffic to serve.
#[derive(Debug, Clone, Copy)]
pub struct Demand {
    pub qps: Decimal,
    pub input_tokens: Decimal,
    pub output_tokens: Decimal,
    /// Fraction of input tokens served from the prefix cache, in `[0, 1)`.
    pub cache_hit: Decimal,
}

impl Demand {
    /// Input tokens per second that must actually be prefilled.
    pub fn prefill_tokens_per_s(&self) -> Decimal {
        self.qps * self.input_tokens * (Decimal::ONE - self.cache_hit)
    }

    pub fn decode_tokens_per_s(&self) -> Decimal {
        self.qps * self.output_tokens
    }
}

/// Latency targets checked against the profile's measured loads.
#[derive(Debug, Clone, Copy)]
pub struct SloTarget {
    pub ttft_ms: f64,
    pub itl_ms: f64,
    /// Which measured percentile must meet the targets: 50, 90 or 99.
    pub percentile: u8,
}

#[derive(Debug, Clone)]
pub struct PlanInput {
    pub demand: Demand,
    /// Saturated throughput of one replica.
    pub prefill_tps: Decimal,
    pub decode_tps: Decimal,
    pub headroom: Decimal,
    pub accelerators_per_replica: u64,
    pub accelerator_hour_usd: Decimal,
    pub slo: Option<SloTarget>,
    /// Measured latencies at several loads; empty when profile values were given directly.
    pub loads: Vec<ProfileLoad>,
}

/// What limits a pool's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    PrefillThroughput,
    DecodeThroughput,
    /// Prefill and decode throughput together on shared replicas.
    CombinedThroughput,
    TtftSlo,
    ItlSlo,
    /// Both latency targets on shared replicas.
    LatencySlo,
}

impl Constraint {
    pub fn describe(self) -> &'static str {
        match self {
            Constraint::PrefillThroughput => "prefill throughput",
            Constraint::DecodeThroughput => "decode throughput",
            Constraint::CombinedThroughput => "prefill + decode throughput",
            Constraint::TtftSlo => "TTFT SLO",
            Constraint::ItlSlo => "ITL SLO",
            Constraint::LatencySlo => "TTFT and ITL SLOs",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSize {
    pub replicas: u64,
    pub accelerators: u64,
    pub binds: Constraint,
}

/// Cost of serving the demand, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cost {
    pub per_hour_usd: Decimal,
    pub per_million_input_usd: Decimal,
    pub per_million_output_usd: Decimal,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub prefill: PoolSize,
    pub decode: PoolSize,
    pub disaggregated_cost: Cost,
    pub colocated: PoolSize,
    pub colocated_cost: Cost,
    /// The measured load whose latencies were used for the SLO check, if any.
    pub slo_load_concurrency: Option<u32>,
    /// Why SLOs were not checked, when they were not.
    pub slo_note: Option<String>,
}

/// Capacity a replica sustains while meeting the latency targets, from the profile.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SloCapacity {
    /// Highest measured prompt tokens/s with TTFT within target.
    prefill_tps: Option<Decimal>,
    /// Highest measured output tokens/s with ITL within target.
    decode_tps: Option<Decimal>,
    /// The highest load meeting both targets: its concurrency and both rates.
    both: Option<(u32, Decimal, Decimal)>,
}

fn to_decimal(value: f64) -> Decimal {
    Decimal::try_from(value).unwrap_or(Decimal::ZERO)
}

fn slo_capacity(loads: &[ProfileLoad], slo: SloTarget) -> SloCapacity {
    let ttft_ok = |l: &ProfileLoad| {
        l.ttft_ms
            .at_percentile(slo.percentile)
            .is_some_and(|v| v <= slo.ttft_ms)
    };
    let itl_ok = |l: &ProfileLoad| {
        l.itl_ms
            .at_percentile(slo.percentile)
            .is_some_and(|v| v <= slo.itl_ms)
    };
    let best = |rates: Vec<f64>| rates.into_iter().reduce(f64::max).map(to_decimal);
    SloCapacity {
        prefill_tps: best(
            loads
                .iter()
                .filter(|l| ttft_ok(l))
                .map(|l| l.input_token_throughput)
                .collect(),
        ),
        decode_tps: best(
            loads
                .iter()
                .filter(|l| itl_ok(l))
                .map(|l| l.output_token_throughput)
                .collect(),
        ),
        both: loads
            .iter()
            .filter(|l| ttft_ok(l) && itl_ok(l))
            .max_by(|a, b| a.request_throughput.total_cmp(&b.request_throughput))
            .map(|l| {
                (
                    l.concurrency,
                    to_decimal(l.input_token_throughput),
                    to_decimal(l.output_token_throughput),
                )
            }),
    }
}

/// Smallest whole number of replicas not below `needed`.
fn whole(needed: Decimal) -> u64 {
    needed.ceil().to_u64().unwrap_or(u64::MAX)
}

/// The larger of the throughput-based and SLO-based sizes; throughput wins ties.
fn pool(
    throughput: (u64, Constraint),
    slo: Option<(u64, Constraint)>,
    accelerators_per_replica: u64,
) -> PoolSize {
    let (replicas, binds) = match slo {
        Some(slo) if slo.0 > throughput.0 => slo,
        _ => throughput,
    };
    PoolSize {
        replicas,
        accelerators: replicas * accelerators_per_replica,
        binds,
    }
}

/// Splits the hourly cost of `accelerators` between input and output tokens, giving input
/// tokens `prefill_share` of it.
fn cost(input: &PlanInput, accelerators: u64, prefill_share: Decimal) -> Cost {
    let per_hour = input.accelerator_hour_usd * Decimal::from(accelerators);
    let million = Decimal::from(1_000_000);
    let seconds_per_hour = Decimal::from(3600);
    let per_million = |share: Decimal, tokens_per_request: Decimal| {
        let tokens_per_hour = input.demand.qps * tokens_per_request * seconds_per_hour;
        if tokens_per_hour.is_zero() {
            Decimal::ZERO
        } else {
            per_hour * share * million / tokens_per_hour
        }
    };
    Cost {
        per_hour_usd: per_hour,
        per_million_input_usd: per_million(prefill_share, input.demand.input_tokens),
        per_million_output_usd: per_million(
            Decimal::ONE - prefill_share,
            input.demand.output_tokens,
        ),
    }
}

/// Sizes both deployment shapes. Fails when the profile has loads but none of them meets
/// the latency targets, since no replica count would then be enough.
pub fn plan(input: &PlanInput) -> Result<Plan, BenchError> {
    let demand = input.demand;
    let prefill_demand = demand.prefill_tokens_per_s();
    let decode_demand = demand.decode_tokens_per_s();
    let per_replica = input.accelerators_per_replica;

    // Multiply before dividing so exact inputs give exact replica counts.
    let prefill_throughput = whole(prefill_demand * input.headroom / input.prefill_tps);
    let decode_throughput = whole(decode_demand * input.headroom / input.decode_tps);
    let combined_throughput = whole(
        (prefill_demand * input.decode_tps + decode_demand * input.prefill_tps) * input.headroom
            / (input.prefill_tps * input.decode_tps),
    );

    let (slo_capacity, slo_note) = match (input.slo, input.loads.is_empty()) {
        (None, _) => (None, Some("no SLO given".to_owned())),
        (Some(_), true) => (
            None,
            Some("SLOs not checked: no measured loads (give --profile)".to_owned()),
        ),
        (Some(slo), false) => {
            let capacity = slo_capacity(&input.loads, slo);
            if capacity.prefill_tps.is_none()
                || capacity.decode_tps.is_none()
                || capacity.both.is_none()
            {
                return Err(BenchError::SloUnreachable {
                    slo_ttft_ms: slo.ttft_ms,
                    slo_itl_ms: slo.itl_ms,
                    percentile: slo.percentile,
                });
            }
            (Some(capacity), None)
        }
    };
    let prefill_slo = slo_capacity
        .and_then(|c| c.prefill_tps)
        .filter(|tps| !tps.is_zero())
        .map(|tps| (whole(prefill_demand / tps), Constraint::TtftSlo));
    let decode_slo = slo_capacity
        .and_then(|c| c.decode_tps)
        .filter(|tps| !tps.is_zero())
        .map(|tps| (whole(decode_demand / tps), Constraint::ItlSlo));
    let colocated_slo = slo_capacity
        .and_then(|c| c.both)
        .and_then(|(_, in_tps, out_tps)| {
            // Each replica at that load serves both rates at once; cover the larger need.
            let by_input = (!in_tps.is_zero()).then(|| prefill_demand / in_tps);
            let by_output = (!out_tps.is_zero()).then(|| decode_demand / out_tps);
            let needed = by_input.into_iter().chain(by_output).max()?;
            Some((whole(needed), Constraint::LatencySlo))
        });

    let prefill = pool(
        (prefill_throughput, Constraint::PrefillThroughput),
        prefill_slo,
        per_replica,
    );
    let decode = pool(
        (decode_throughput, Constraint::DecodeThroughput),
        decode_slo,
        per_replica,
    );
    let colocated = pool(
        (combined_throughput, Constraint::CombinedThroughput),
        colocated_slo,
        per_replica,
    );

    let disaggregated_accelerators = prefill.accelerators + decode.accelerators;
    let disaggregated_share = if disaggregated_accelerators == 0 {
        Decimal::ZERO
    } else {
        Decimal::from(prefill.accelerators) / Decimal::from(disaggregated_accelerators)
    };
    // On shared replicas, input tokens pay for the share of time spent prefilling.
    let prefill_work = prefill_demand / input.prefill_tps;
    let decode_work = decode_demand / input.decode_tps;
    let colocated_share = if (prefill_work + decode_work).is_zero() {
        Decimal::ZERO
    } else {
        prefill_work / (prefill_work + decode_work)
    };
    Ok(Plan {
        prefill,
        decode,
        disaggregated_cost: cost(input, disaggregated_accelerators, disaggregated_share),
        colocated,
        colocated_cost: cost(input, colocated.accelerators, colocated_share),
        slo_load_concurrency: slo_capacity.and_then(|c| c.both).map(|(c, _, _)| c),
        slo_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Summary;

    /// Decimal from a literal string, so test values are exact.
    fn dec(text: &str) -> Decimal {
        text.parse().expect("valid decimal literal")
    }

    fn published_example() -> PlanInput {
        PlanInput {
            demand: Demand {
                qps: dec("1000"),
                input_tokens: dec("2000"),
                output_tokens: dec("500"),
                cache_hit: dec("0.4"),
            },
            prefill_tps: dec("12000"),
            decode_tps: dec("2400"),
            headroom: dec("1.8"),
            accelerators_per_replica: 1,
            accelerator_hour_usd: dec("2.0"),
            slo: None,
            loads: Vec::new(),
        }
    }

    fn load(
        concurrency: u32,
        ttft_p90: f64,
        itl_p90: f64,
        in_tps: f64,
        out_tps: f64,
    ) -> ProfileLoad {
        let summary = |p90| Summary {
            count: 1,
            mean: p90,
            median: p90,
            p90,
            p99: p90,
            min: p90,
            max: p90,
        };
        ProfileLoad {
            concurrency,
            request_throughput: out_tps / 100.0,
            input_token_throughput: in_tps,
            output_token_throughput: out_tps,
            failed: 0,
            ttft_ms: summary(ttft_p90),
            itl_ms: summary(itl_p90),
            tpot_ms: summary(itl_p90),
        }
    }

    #[test]
    fn published_example_needs_180_prefill_and_375_decode_accelerators() {
        let plan = plan(&published_example()).unwrap();
        assert_eq!(plan.prefill.accelerators, 180);
        assert_eq!(plan.decode.accelerators, 375);
        assert_eq!(plan.prefill.binds, Constraint::PrefillThroughput);
        assert_eq!(plan.decode.binds, Constraint::DecodeThroughput);
        assert_eq!(plan.colocated.accelerators, 555);
    }

    #[test]
    fn cost_per_million_tokens_is_exact_decimal() {
        let plan = plan(&published_example()).unwrap();
        let cost = plan.disaggregated_cost;
        assert_eq!(cost.per_hour_usd, dec("1110"));
        // 180 accelerators * 2 USD/h over 1000 * 2000 * 3600 input tokens per hour.
        assert_eq!(cost.per_million_input_usd, dec("0.05"));
        // 375 * 2 USD/h over 1000 * 500 * 3600 output tokens per hour.
        assert_eq!(cost.per_million_output_usd.round_dp(6), dec("0.416667"));
        let colocated = plan.colocated_cost;
        assert_eq!(colocated.per_million_input_usd.round_dp(6), dec("0.05"));
        assert_eq!(
            colocated.per_million_output_usd.round_dp(6),
            dec("0.416667")
        );
    }

    #[test]
    fn replicas_round_up() {
        let mut input = published_example();
        input.demand.qps = dec("1001");
        let plan = plan(&input).unwrap();
        assert_eq!(plan.prefill.accelerators, 181);
        assert_eq!(plan.decode.accelerators, 376);
    }

    #[test]
    fn accelerators_are_replicas_times_replica_size() {
        let mut input = published_example();
        input.accelerators_per_replica = 2;
        let plan = plan(&input).unwrap();
        assert_eq!(
            (plan.prefill.replicas, plan.prefill.accelerators),
            (180, 360)
        );
    }

    #[test]
    fn tight_itl_slo_binds_decode() {
        let mut input = published_example();
        input.slo = Some(SloTarget {
            ttft_ms: 300.0,
            itl_ms: 30.0,
            percentile: 90,
        });
        // Only the light load meets ITL <= 30 ms, and it yields 800 output tok/s.
        input.loads = vec![
            load(4, 100.0, 20.0, 9000.0, 800.0),
            load(32, 250.0, 45.0, 11000.0, 2300.0),
        ];
        let plan = plan(&input).unwrap();
        assert_eq!(plan.decode.binds, Constraint::ItlSlo);
        assert_eq!(plan.decode.replicas, 625);
        // TTFT is met at 11000 prompt tok/s: 1.2M / 11000 = 110 < 180, throughput binds.
        assert_eq!(plan.prefill.binds, Constraint::PrefillThroughput);
        assert_eq!(plan.slo_load_concurrency, Some(4));
        // 500k output tok/s / 800 = 625 shared replicas, more than the 555 throughput needs.
        assert_eq!(plan.colocated.binds, Constraint::LatencySlo);
        assert_eq!(plan.colocated.replicas, 625);
    }

    #[test]
    fn unreachable_slo_is_an_error() {
        let mut input = published_example();
        input.slo = Some(SloTarget {
            ttft_ms: 10.0,
            itl_ms: 30.0,
            percentile: 90,
        });
        input.loads = vec![load(1, 50.0, 20.0, 1000.0, 100.0)];
        assert!(matches!(
            plan(&input),
            Err(BenchError::SloUnreachable { .. })
        ));
    }

    #[test]
    fn slo_is_not_checked_without_measured_loads() {
        let mut input = published_example();
        input.slo = Some(SloTarget {
            ttft_ms: 1.0,
            itl_ms: 1.0,
            percentile: 90,
        });
        let plan = plan(&input).unwrap();
        assert!(plan.slo_note.is_some());
        assert_eq!(plan.prefill.accelerators, 180);
    }
}
