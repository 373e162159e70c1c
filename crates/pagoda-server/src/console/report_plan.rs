//! A saved `pagoda plan --out` as console tables: the demand and per-replica figures it was
//! computed from, the pools of both deployments and what each costs.

use pagoda_bench::plan::{Cost, PoolSize};
use pagoda_bench::plan_report::PlanReport;
use rust_decimal::Decimal;

use super::html::{escape, num, table};
use super::report_bench::facts;

fn dec(v: Decimal) -> String {
    v.round_dp(4).normalize().to_string()
}

fn pool_row(deployment: &str, pool_name: &str, pool: &PoolSize) -> Vec<String> {
    vec![
        deployment.to_string(),
        pool_name.to_string(),
        pool.replicas.to_string(),
        pool.accelerators.to_string(),
        escape(pool.binds.describe()),
    ]
}

fn cost_row(deployment: &str, accelerators: u64, c: &Cost) -> Vec<String> {
    vec![
        deployment.to_string(),
        accelerators.to_string(),
        dec(c.per_hour_usd),
        dec(c.per_million_input_usd),
        dec(c.per_million_output_usd),
    ]
}

pub fn plan(r: &PlanReport) -> String {
    let p = &r.plan;
    let slo = match (&r.slo, &p.slo_note) {
        (_, Some(note)) => note.clone(),
        (Some(s), None) => format!(
            "p{}: TTFT <= {} ms, ITL <= {} ms; highest profiled load meeting both: {}",
            s.percentile,
            s.ttft_ms.map_or("-".into(), |v| num(v, 1)),
            s.itl_ms.map_or("-".into(), |v| num(v, 1)),
            p.slo_load_concurrency
                .map_or("none".into(), |c| format!("concurrency {c}"))
        ),
        (None, None) => "none given".into(),
    };
    let mut out = facts(&[
        (
            "demand",
            format!(
                "{} req/s x ({} input, {} output tokens), {}% prefix-cache hits",
                dec(r.qps),
                dec(r.input_tokens),
                dec(r.output_tokens),
                // Checked: the file is outside input, and Decimal's `*` panics on overflow.
                r.cache_hit
                    .checked_mul(Decimal::ONE_HUNDRED)
                    .map_or("-".into(), dec)
            ),
        ),
        (
            "per replica",
            format!(
                "prefill {} tokens/s, decode {} tokens/s; headroom {}",
                r.prefill_tps.round_dp(1).normalize(),
                r.decode_tps.round_dp(1).normalize(),
                dec(r.headroom)
            ),
        ),
        (
            "accelerators",
            format!(
                "{} per replica at {} USD/h",
                r.accelerators_per_replica,
                dec(r.accelerator_hour_usd)
            ),
        ),
        ("SLO", slo),
        ("profile", r.profile.clone().unwrap_or_else(|| "-".into())),
        ("tool", r.tool.clone()),
    ]);
    out.push_str("<h2>Replicas</h2>");
    out.push_str(&table(
        "plan-pools",
        &["deployment", "pool", "replicas", "accelerators", "binds"],
        &[
            pool_row("disaggregated", "prefill", &p.prefill),
            pool_row("disaggregated", "decode", &p.decode),
            pool_row("colocated", "shared", &p.colocated),
        ],
    ));
    out.push_str("<h2>Cost (USD)</h2>");
    out.push_str(&table(
        "plan-cost",
        &[
            "deployment",
            "accelerators",
            "per hour",
            "per 1M input tokens",
            "per 1M output tokens",
        ],
        &[
            cost_row(
                "disaggregated",
                p.prefill.accelerators.saturating_add(p.decode.accelerators),
                &p.disaggregated_cost,
            ),
            cost_row("colocated", p.colocated.accelerators, &p.colocated_cost),
        ],
    ));
    out
}
