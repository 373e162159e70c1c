//! `pagoda keys create|list|revoke`: API keys in the gateway database.

use std::path::PathBuf;

use anyhow::bail;
use clap::{Args, Subcommand};
use pagoda_gateway::{clock, KeyId, KeyStore, TenantId};

#[derive(Debug, Args)]
pub struct DbArg {
    /// The gateway database (the one `pagoda serve --gateway-db` uses).
    #[arg(long, env = "PAGODA_GATEWAY_DB")]
    pub gateway_db: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for a tenant and print it (the only time it is shown).
    Create {
        #[command(flatten)]
        db: DbArg,
        #[arg(long)]
        tenant: String,
        /// Expiry: a UTC date or time (2026-12-31, 2026-12-31T18:00:00Z).
        #[arg(long)]
        expires: Option<String>,
        /// A label for listings.
        #[arg(long)]
        name: Option<String>,
    },
    /// List keys (ids, tenants, state; never the keys themselves).
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Revoke a key by its id (the 16 hex digits after `pgd_`).
    Revoke {
        #[command(flatten)]
        db: DbArg,
        key_id: String,
    },
}

pub fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create {
            db,
            tenant,
            expires,
            name,
        } => {
            let expires = expires.as_deref().map(clock::parse_time).transpose()?;
            let store = KeyStore::open(&db.gateway_db)?;
            let (record, key) =
                store.create(&TenantId::new(tenant.trim()), name.as_deref(), expires)?;
            let target = format!("key {} of tenant {}", record.key_id, record.tenant);
            store.record_action("cli", "", "key.create", &target)?;
            // The key alone on stdout, for scripts; the note on stderr.
            println!("{}", key.reveal());
            eprintln!(
                "created key {} for tenant {}; it is shown only now, store it safely",
                record.key_id, record.tenant
            );
        }
        KeysCommand::List { db } => {
            let store = KeyStore::open(&db.gateway_db)?;
            println!(
                "{:<18} {:<16} {:<16} {:<20} {:<20} state",
                "key id", "tenant", "name", "created (UTC)", "expires (UTC)"
            );
            let now = clock::now_ms();
            for k in store.list()? {
                let state = if k.revoked_ms.is_some() {
                    "revoked"
                } else if !k.is_usable(now) {
                    "expired"
                } else {
                    "active"
                };
                println!(
                    "{:<18} {:<16} {:<16} {:<20} {:<20} {state}",
                    k.key_id.as_str(),
                    k.tenant.as_str(),
                    k.name.as_deref().unwrap_or("-"),
                    clock::format_ms(k.created_ms),
                    k.expires_ms.map_or("-".into(), clock::format_ms),
                );
            }
        }
        KeysCommand::Revoke { db, key_id } => {
            let store = KeyStore::open(&db.gateway_db)?;
            let id = key_id.trim().trim_start_matches("pgd_");
            if !store.revoke(&KeyId::new(id))? {
                bail!("no key with id `{id}`");
            }
            store.record_action("cli", "", "key.revoke", &format!("key {id}"))?;
            eprintln!("revoked key {id}");
        }
    }
    Ok(())
}
