//! `pagoda audit verify FILE [--key KEY] [--anchors GATEWAY_DB]`: checks an audit log's hash
//! chain, keyed with the server's `--audit-key`, and against the anchors the server kept in
//! the gateway database.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use pagoda_guard::{Anchor, AuditKey};

#[derive(Args)]
pub struct VerifyArgs {
    /// The audit log (JSONL) written by `pagoda serve --audit-log`.
    pub file: PathBuf,
    /// The key file the server signed the log with (`--audit-key`).
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// The gateway database the server anchored the log in (`--gateway-db`): catches a log
    /// cut short after an anchor.
    #[arg(long)]
    pub anchors: Option<PathBuf>,
}

pub fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(AuditKey::load).transpose()?;
    let anchors: Vec<Anchor> = match &args.anchors {
        Some(db) => {
            let log = pagoda_server::audit_log_name(&args.file);
            let list = pagoda_gateway::AuditAnchors::open(db)?
                .list(&log)
                .with_context(|| format!("reading anchors from {}", db.display()))?;
            if list.is_empty() {
                anyhow::bail!("{} holds no anchors for {log}", db.display());
            }
            list.into_iter()
                .map(|(seq, hash)| Anchor { seq, hash })
                .collect()
        }
        None => Vec::new(),
    };
    let verified = pagoda_guard::verify_with(&args.file, key.as_ref(), &anchors)
        .with_context(|| format!("{} failed verification", args.file.display()))?;
    println!(
        "{}: {} records, chain intact{}{}",
        args.file.display(),
        verified.records,
        if key.is_some() { ", keyed" } else { "" },
        match anchors.len() {
            0 => String::new(),
            n => format!(", {n} anchors match"),
        }
    );
    Ok(())
}
