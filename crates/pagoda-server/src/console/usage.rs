//! Usage and cost: tokens, cost, cached-token share and accelerator time by tenant x model x
//! hour or day, from the metering store (the same query as `/v1/usage`), as a stacked chart
//! of cost per tenant, a table, and CSV.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use pagoda_gateway::clock::now_ms;
use pagoda_gateway::{UsageQuery, UsageRow};
use rust_decimal::Decimal;

use super::auth::{no_store, Admin};
use super::html::{escape, page, table};
use crate::state::AppState;

const MAX_DAYS: i64 = 366;
const COLOURS: [&str; 8] = [
    "#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#14b8a6", "#f97316", "#64748b",
];

/// What the page and the CSV are asked for: the last `days`, by hour or by day.
struct Range {
    days: i64,
    by_day: bool,
}

impl Range {
    fn parse(params: &HashMap<String, String>) -> Result<Range, String> {
        let days = match params
            .get("days")
            .map(|d| d.trim())
            .filter(|d| !d.is_empty())
        {
            None => 7,
            Some(d) => match d.parse::<i64>() {
                Ok(d) if (1..=MAX_DAYS).contains(&d) => d,
                _ => return Err(format!("days must be a whole number from 1 to {MAX_DAYS}")),
            },
        };
        let by_day = match params.get("by").map(String::as_str) {
            None | Some("day") => true,
            Some("hour") => false,
            Some(_) => return Err("by must be hour or day".into()),
        };
        Ok(Range { days, by_day })
    }
}

/// One row of the table: a period (hour or day), tenant and model.
struct Line {
    period: String,
    row: UsageRow,
}

async fn lines(state: &AppState, range: &Range) -> Result<Vec<Line>, String> {
    let gateway = state.gateway().ok_or("no gateway")?;
    let query = UsageQuery {
        from_ms: Some(now_ms() - range.days * 86_400_000),
        by_model: true,
        by_hour: true,
        ..UsageQuery::default()
    };
    let rows = gateway.usage(&query).await.map_err(|e| e.to_string())?;
    // Hours fold into days by their date: `hour_label` is "YYYY-MM-DDTHH:00:00Z".
    let mut folded: BTreeMap<(String, String, String), UsageRow> = BTreeMap::new();
    for row in rows {
        let hour = row.hour.clone().unwrap_or_default();
        let period = if range.by_day {
            hour.get(..10).unwrap_or(&hour).to_string()
        } else {
            hour
        };
        let model = row.model.clone().unwrap_or_default();
        let key = (period, row.tenant.clone(), model);
        match folded.get_mut(&key) {
            None => {
                folded.insert(key, row);
            }
            Some(sum) => {
                sum.requests += row.requests;
                sum.prompt_tokens += row.prompt_tokens;
                sum.cached_tokens += row.cached_tokens;
                sum.completion_tokens += row.completion_tokens;
                sum.cost += row.cost;
                sum.compute_ms += row.compute_ms;
            }
        }
    }
    Ok(folded
        .into_iter()
        .map(|((period, _, _), row)| Line { period, row })
        .collect())
}

fn cached_share(row: &UsageRow) -> String {
    if row.prompt_tokens == 0 {
        "-".into()
    } else {
        format!(
            "{:.1}%",
            row.cached_tokens as f64 * 100.0 / row.prompt_tokens as f64
        )
    }
}

/// Cost per period, stacked by tenant, as an SVG drawn here (no script needed).
fn chart(lines: &[Line]) -> String {
    let periods: BTreeSet<&str> = lines.iter().map(|l| l.period.as_str()).collect();
    let tenants: BTreeSet<&str> = lines.iter().map(|l| l.row.tenant.as_str()).collect();
    if periods.is_empty() {
        return String::new();
    }
    let mut stacks: BTreeMap<&str, BTreeMap<&str, Decimal>> = BTreeMap::new();
    for l in lines {
        *stacks
            .entry(l.period.as_str())
            .or_default()
            .entry(l.row.tenant.as_str())
            .or_default() += l.row.cost;
    }
    let max = stacks
        .values()
        .map(|s| s.values().copied().sum::<Decimal>())
        .max()
        .unwrap_or_default();
    let max_f = f64::try_from(max).unwrap_or(0.0).max(f64::MIN_POSITIVE);
    let (w, h) = (600.0, 160.0);
    let slot = w / periods.len() as f64;
    let mut svg = format!(
        "<svg id=\"usage-chart\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-label=\"cost per period by tenant\">",
        h + 20.0
    );
    for (i, period) in periods.iter().enumerate() {
        let mut y = h;
        for (t, tenant) in tenants.iter().enumerate() {
            let cost = stacks[period].get(tenant).copied().unwrap_or_default();
            let bar = f64::try_from(cost).unwrap_or(0.0) / max_f * (h - 10.0);
            if bar > 0.0 {
                y -= bar;
                let _ = write!(
                    svg,
                    "<rect x=\"{:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{bar:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                    i as f64 * slot + slot * 0.1,
                    slot * 0.8,
                    COLOURS[t % COLOURS.len()],
                    escape(period),
                    escape(tenant),
                    cost.normalize()
                );
            }
        }
    }
    let _ = write!(
        svg,
        "<text x=\"0\" y=\"{}\" font-size=\"11\">{}</text><text x=\"{w}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{}</text></svg>",
        h + 15.0,
        escape(periods.first().unwrap_or(&"")),
        h + 15.0,
        escape(periods.last().unwrap_or(&""))
    );
    let legend: String = tenants
        .iter()
        .enumerate()
        .map(|(t, name)| {
            format!(
                "<span style=\"color:{}\">&#9632;</span> {} ",
                COLOURS[t % COLOURS.len()],
                escape(name)
            )
        })
        .collect();
    format!("<div class=\"card\">{svg}<div class=\"value\">cost, max {} per period. {legend}</div></div>", max.normalize())
}

pub async fn page_handler(
    State(state): State<AppState>,
    admin: Admin,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let title = "Usage and cost";
    let respond = |status: StatusCode, body: String| {
        no_store(
            (
                status,
                Html(page(
                    title,
                    "/ui/usage",
                    admin.tenant.as_str(),
                    &admin.csrf,
                    &body,
                )),
            )
                .into_response(),
        )
    };
    let range = match Range::parse(&params) {
        Ok(range) => range,
        Err(e) => {
            return respond(
                StatusCode::BAD_REQUEST,
                format!("<p class=\"error\">{}</p>", escape(&e)),
            )
        }
    };
    let lines = match lines(&state, &range).await {
        Ok(lines) => lines,
        Err(e) => {
            tracing::error!(error = %e, "the console cannot read usage");
            return respond(
                StatusCode::BAD_GATEWAY,
                "<p class=\"error\">The metering store cannot be read.</p>".into(),
            );
        }
    };
    let by = if range.by_day { "day" } else { "hour" };
    let form = format!(
        "<form class=\"create\" method=\"get\" action=\"/ui/usage\">\
         <label>Last days<input name=\"days\" type=\"number\" min=\"1\" max=\"{MAX_DAYS}\" value=\"{}\"></label>\
         <label>By<select name=\"by\"><option{}>day</option><option{}>hour</option></select></label>\
         <button type=\"submit\">Show</button>\
         <a href=\"/ui/usage.csv?days={}&amp;by={by}\" id=\"csv\">CSV</a></form>",
        range.days,
        if range.by_day { " selected" } else { "" },
        if range.by_day { "" } else { " selected" },
        range.days,
    );
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            let r = &l.row;
            vec![
                escape(&l.period),
                escape(&r.tenant),
                escape(r.model.as_deref().unwrap_or("-")),
                r.requests.to_string(),
                r.prompt_tokens.to_string(),
                r.cached_tokens.to_string(),
                cached_share(r),
                r.completion_tokens.to_string(),
                r.cost.normalize().to_string(),
                format!("{:.1}", r.compute_ms / 1e3),
            ]
        })
        .collect();
    let body = format!(
        "{form}{}{}",
        chart(&lines),
        table(
            "usage",
            &[
                by,
                "tenant",
                "model",
                "requests",
                "prompt tokens",
                "cached",
                "cached share",
                "output tokens",
                "cost",
                "compute s"
            ],
            &rows
        )
    );
    respond(StatusCode::OK, body)
}

fn csv_field(text: &str) -> String {
    // Quoted, and a leading formula character neutralised for spreadsheets.
    let text = if text.starts_with(['=', '+', '-', '@']) {
        format!("'{text}")
    } else {
        text.to_string()
    };
    format!("\"{}\"", text.replace('"', "\"\""))
}

/// `GET /ui/usage.csv?days=&by=`.
pub async fn csv(
    State(state): State<AppState>,
    _admin: Admin,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    let range = match Range::parse(&params) {
        Ok(range) => range,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let lines = match lines(&state, &range).await {
        Ok(lines) => lines,
        Err(_) => {
            return (StatusCode::BAD_GATEWAY, "the metering store cannot be read").into_response()
        }
    };
    let mut out = format!(
        "{},tenant,model,requests,prompt_tokens,cached_tokens,completion_tokens,cost,compute_ms\n",
        if range.by_day { "day" } else { "hour" }
    );
    for l in &lines {
        let r = &l.row;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{:.3}",
            csv_field(&l.period),
            csv_field(&r.tenant),
            csv_field(r.model.as_deref().unwrap_or("")),
            r.requests,
            r.prompt_tokens,
            r.cached_tokens,
            r.completion_tokens,
            r.cost.normalize(),
            r.compute_ms
        );
    }
    no_store(
        (
            [
                (CONTENT_TYPE, "text/csv; charset=utf-8"),
                (
                    CONTENT_DISPOSITION,
                    "attachment; filename=\"pagoda-usage.csv\"",
                ),
            ],
            out,
        )
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_bounded() {
        let p = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>()
        };
        let r = Range::parse(&p(&[])).unwrap();
        assert_eq!((r.days, r.by_day), (7, true));
        assert!(!Range::parse(&p(&[("by", "hour")])).unwrap().by_day);
        for bad in ["0", "367", "-1", "1e3", "99999999999999999999"] {
            assert!(Range::parse(&p(&[("days", bad)])).is_err(), "{bad}");
        }
        assert!(Range::parse(&p(&[("by", "week")])).is_err());
    }

    #[test]
    fn csv_fields_are_quoted_and_formulas_defused() {
        assert_eq!(csv_field("acme"), "\"acme\"");
        assert_eq!(csv_field("a\"b"), "\"a\"\"b\"");
        assert_eq!(csv_field("=HYPERLINK(1)"), "\"'=HYPERLINK(1)\"");
    }
}
