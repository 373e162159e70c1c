//! `pagoda usage`: tokens and cost per tenant x model x hour from the metering store.

use std::path::PathBuf;

use clap::Args;
use pagoda_gateway::{clock, open_sink, SinkSpec, UsageQuery};

#[derive(Debug, Args)]
pub struct UsageArgs {
    /// The gateway database (also the default metering store).
    #[arg(long, env = "PAGODA_GATEWAY_DB")]
    pub gateway_db: PathBuf,
    /// The store to read, as `pagoda serve --metering-sink` [default: sqlite].
    #[arg(long, env = "PAGODA_METERING_SINK")]
    pub metering_sink: Option<String>,
    #[arg(long)]
    pub tenant: Option<String>,
    /// From (inclusive): a UTC date or time, or unix seconds.
    #[arg(long)]
    pub from: Option<String>,
    /// To (exclusive).
    #[arg(long)]
    pub to: Option<String>,
    /// Extra groups besides tenant: model, hour or model,hour.
    #[arg(long, default_value = "model,hour")]
    pub group_by: String,
    /// Print JSON rows instead of a table.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: UsageArgs) -> anyhow::Result<()> {
    let mut query = UsageQuery {
        tenant: args.tenant,
        from_ms: args.from.as_deref().map(clock::parse_time).transpose()?,
        to_ms: args.to.as_deref().map(clock::parse_time).transpose()?,
        ..UsageQuery::default()
    };
    query.set_group_by(&args.group_by)?;
    let spec = match &args.metering_sink {
        Some(s) => SinkSpec::parse(s)?,
        None => SinkSpec::Sqlite(None),
    };
    if let SinkSpec::Sqlite(None) = spec {
        if !args.gateway_db.exists() {
            anyhow::bail!("no gateway database at {}", args.gateway_db.display());
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let rows = runtime.block_on(async {
        let sink = open_sink(&spec, &args.gateway_db)?;
        sink.usage(&query).await
    })?;
    if args.json {
        for row in &rows {
            println!("{}", serde_json::to_string(row)?);
        }
        return Ok(());
    }
    println!(
        "{:<16} {:<20} {:<21} {:>9} {:>12} {:>12} {:>12} {:>14}",
        "tenant", "model", "hour (UTC)", "requests", "prompt", "cached", "completion", "cost"
    );
    for r in rows {
        println!(
            "{:<16} {:<20} {:<21} {:>9} {:>12} {:>12} {:>12} {:>14}",
            r.tenant,
            r.model.as_deref().unwrap_or("*"),
            r.hour.as_deref().unwrap_or("*"),
            r.requests,
            r.prompt_tokens,
            r.cached_tokens,
            r.completion_tokens,
            r.cost.normalize().to_string(),
        );
    }
    Ok(())
}
