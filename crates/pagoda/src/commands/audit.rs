//! `pagoda audit verify FILE`: checks an audit log's hash chain.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

#[derive(Args)]
pub struct VerifyArgs {
    /// The audit log (JSONL) written by `pagoda serve --audit-log`.
    pub file: PathBuf,
}

pub fn verify(args: VerifyArgs) -> anyhow::Result<()> {
    let verified = pagoda_guard::verify(&args.file)
        .with_context(|| format!("{} failed verification", args.file.display()))?;
    println!(
        "{}: {} records, chain intact",
        args.file.display(),
        verified.records
    );
    Ok(())
}
