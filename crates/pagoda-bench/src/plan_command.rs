//! `pagoda plan`: argument checks, profile loading and the printed plan.

use crate::cli::PlanArgs;
use crate::error::BenchError;
use crate::plan::{plan, Demand, Plan, PlanInput, PoolSize, SloTarget};
use crate::plan_report::PlanReport;
use crate::profile_format::Profile;
use rust_decimal::Decimal;
use std::fmt::Write as _;

pub fn plan_input(args: &PlanArgs) -> Result<PlanInput, BenchError> {
    let profile = args.profile.as_deref().map(Profile::read).transpose()?;
    let from_profile = |value: Option<Decimal>, measured: Option<f64>, flag: &str| {
        value
            .or_else(|| measured.and_then(|v| Decimal::try_from(v).ok()))
            .filter(|v| *v > Decimal::ZERO)
            .ok_or_else(|| {
                BenchError::InvalidArgument(format!(
                    "{flag} must be positive; give it or a --profile that measured it"
                ))
            })
    };
    let prefill_tps = from_profile(
        args.prefill_tps,
        profile.as_ref().map(|p| p.prefill_tps),
        "--prefill-tps",
    )?;
    let decode_tps = from_profile(
        args.decode_tps,
        profile.as_ref().map(|p| p.decode_tps),
        "--decode-tps",
    )?;
    let invalid = |message: &str| Err(BenchError::InvalidArgument(message.to_owned()));
    if args.cache_hit < Decimal::ZERO || args.cache_hit >= Decimal::ONE {
        return invalid("--cache-hit must be in [0, 1)");
    }
    if args.qps <= Decimal::ZERO || args.input < Decimal::ZERO || args.output < Decimal::ZERO {
        return invalid("--qps must be positive and --input/--output not negative");
    }
    if args.headroom <= Decimal::ZERO || args.accelerators_per_replica == 0 {
        return invalid("--headroom and --accelerators-per-replica must be positive");
    }
    if !matches!(args.slo_percentile, 50 | 90 | 99) {
        return invalid("--slo-percentile must be 50, 90 or 99");
    }
    let slo = match (args.slo_ttft_ms, args.slo_itl_ms) {
        (None, None) => None,
        (ttft, itl) => Some(SloTarget {
            ttft_ms: ttft.unwrap_or(f64::INFINITY),
            itl_ms: itl.unwrap_or(f64::INFINITY),
            percentile: args.slo_percentile,
        }),
    };
    Ok(PlanInput {
        demand: Demand {
            qps: args.qps,
            input_tokens: args.input,
            output_tokens: args.output,
            cache_hit: args.cache_hit,
        },
        prefill_tps,
        decode_tps,
        headroom: args.headroom,
        accelerators_per_replica: args.accelerators_per_replica,
        accelerator_hour_usd: args.accelerator_hour_usd,
        slo,
        loads: profile.map(|p| p.loads).unwrap_or_default(),
    })
}

fn pool_line(name: &str, pool: &PoolSize) -> String {
    format!(
        "  {name:<10}{:>8} replicas {:>8} accelerators   binds: {}",
        pool.replicas,
        pool.accelerators,
        pool.binds.describe()
    )
}

pub fn format_plan(input: &PlanInput, plan: &Plan) -> String {
    let d = &input.demand;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Demand: {} req/s x ({} input, {} output tokens), {}% prefix-cache hits",
        d.qps,
        d.input_tokens,
        d.output_tokens,
        (d.cache_hit * Decimal::ONE_HUNDRED).normalize()
    );
    let _ = writeln!(
        out,
        "  prefill {} uncached tokens/s, decode {} tokens/s",
        d.prefill_tokens_per_s().normalize(),
        d.decode_tokens_per_s().normalize()
    );
    let _ = writeln!(
        out,
        "Per replica: prefill {} tokens/s, decode {} tokens/s; headroom {}",
        input.prefill_tps.round_dp(1).normalize(),
        input.decode_tps.round_dp(1).normalize(),
        input.headroom.normalize()
    );
    match (&plan.slo_note, input.slo, plan.slo_load_concurrency) {
        (Some(note), _, _) => {
            let _ = writeln!(out, "SLO: {note}");
        }
        (None, Some(slo), load) => {
            let _ = writeln!(
                out,
                "SLO at p{}: TTFT <= {} ms, ITL <= {} ms; highest profiled load meeting both: concurrency {}",
                slo.percentile,
                slo.ttft_ms,
                slo.itl_ms,
                load.map_or("-".into(), |c| c.to_string())
            );
        }
        (None, None, _) => {}
    }
    let money = |v: Decimal| v.round_dp(4).normalize();
    let _ = writeln!(out, "\nDisaggregated (separate prefill and decode pools):");
    let _ = writeln!(out, "{}", pool_line("prefill", &plan.prefill));
    let _ = writeln!(out, "{}", pool_line("decode", &plan.decode));
    let c = &plan.disaggregated_cost;
    let _ = writeln!(
        out,
        "  total {} accelerators, {} USD/h; per 1M input tokens {} USD, per 1M output tokens {} USD",
        plan.prefill.accelerators + plan.decode.accelerators,
        money(c.per_hour_usd),
        money(c.per_million_input_usd),
        money(c.per_million_output_usd)
    );
    let _ = writeln!(out, "\nColocated (every replica does prefill and decode):");
    let _ = writeln!(out, "{}", pool_line("shared", &plan.colocated));
    let c = &plan.colocated_cost;
    let _ = writeln!(
        out,
        "  total {} accelerators, {} USD/h; per 1M input tokens {} USD, per 1M output tokens {} USD",
        plan.colocated.accelerators,
        money(c.per_hour_usd),
        money(c.per_million_input_usd),
        money(c.per_million_output_usd)
    );
    out
}

pub fn run(args: &PlanArgs) -> Result<Plan, BenchError> {
    let input = plan_input(args)?;
    let plan = plan(&input)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&plan).expect("plans always serialise")
        );
    } else {
        print!("{}", format_plan(&input, &plan));
    }
    if let Some(path) = &args.out {
        PlanReport::new(&input, &plan, args.profile.as_deref()).write(path)?;
    }
    Ok(plan)
}
