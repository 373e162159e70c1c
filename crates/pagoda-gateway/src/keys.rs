//! API keys in the gateway database: create (the key is returned once), list, revoke, and
//! authenticate a presented key.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension};

use crate::clock::now_ms;
use crate::db;
use crate::error::GatewayError;
use crate::ids::{KeyId, TenantId};
use crate::secret::{self, ApiKey};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub key_id: KeyId,
    pub tenant: TenantId,
    pub name: Option<String>,
    pub created_ms: i64,
    pub expires_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
    /// When the key last authenticated a request, to the minute.
    pub last_used_ms: Option<i64>,
}

impl KeyRecord {
    pub fn is_usable(&self, now_ms: i64) -> bool {
        self.revoked_ms.is_none() && self.expires_ms.is_none_or(|e| now_ms < e)
    }
}

pub struct KeyStore {
    conn: Mutex<Connection>,
    /// When each key's `last_used_ms` was last written: at most once a minute, so the
    /// request path does not write the database on every request.
    touched: Mutex<HashMap<KeyId, i64>>,
}

/// How stale `last_used_ms` may be.
const TOUCH_EVERY_MS: i64 = 60_000;

impl KeyStore {
    pub fn open(path: &Path) -> Result<KeyStore, GatewayError> {
        Ok(KeyStore {
            conn: Mutex::new(db::open(path)?),
            touched: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn create(
        &self,
        tenant: &TenantId,
        name: Option<&str>,
        expires_ms: Option<i64>,
    ) -> Result<(KeyRecord, ApiKey), GatewayError> {
        if tenant.as_str().trim().is_empty() {
            return Err(GatewayError::invalid("tenant", "the tenant name is empty"));
        }
        let now = now_ms();
        if expires_ms.is_some_and(|e| e <= now) {
            return Err(GatewayError::invalid(
                "expires",
                "the expiry is in the past",
            ));
        }
        let (key_id, key) = ApiKey::generate();
        let (_, secret) = secret::parse(key.reveal()).expect("a generated key parses");
        let hash = secret::hash(&key_id, secret);
        self.conn().execute(
            "INSERT INTO api_keys (key_id, tenant, name, hash, created_ms, expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                key_id.as_str(),
                tenant.as_str(),
                name,
                hash,
                now,
                expires_ms
            ],
        )?;
        let record = KeyRecord {
            key_id,
            tenant: tenant.clone(),
            name: name.map(str::to_string),
            created_ms: now,
            expires_ms,
            revoked_ms: None,
            last_used_ms: None,
        };
        Ok((record, key))
    }

    pub fn list(&self) -> Result<Vec<KeyRecord>, GatewayError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT key_id, tenant, name, created_ms, expires_ms, revoked_ms, last_used_ms
             FROM api_keys ORDER BY tenant, created_ms",
        )?;
        let rows = stmt.query_map([], record_of)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One key's record by id, live or not.
    pub fn get(&self, key_id: &KeyId) -> Result<Option<KeyRecord>, GatewayError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT key_id, tenant, name, created_ms, expires_ms, revoked_ms, last_used_ms
             FROM api_keys WHERE key_id = ?1",
        )?;
        Ok(stmt.query_row([key_id.as_str()], record_of).optional()?)
    }

    /// Records that `key_id` was just used, unless it was within the last minute.
    fn touch(&self, key_id: &KeyId, now: i64) -> Result<(), GatewayError> {
        {
            let mut touched = self.touched.lock().unwrap_or_else(|e| e.into_inner());
            match touched.get(key_id) {
                Some(&last) if now - last < TOUCH_EVERY_MS => return Ok(()),
                _ => touched.insert(key_id.clone(), now),
            };
        }
        self.conn().execute(
            "UPDATE api_keys SET last_used_ms = ?2 WHERE key_id = ?1",
            params![key_id.as_str(), now],
        )?;
        Ok(())
    }

    /// Revokes a key by its id; `false` when no such key exists. Takes effect on the next
    /// request: every authentication reads the row.
    pub fn revoke(&self, key_id: &KeyId) -> Result<bool, GatewayError> {
        let changed = self.conn().execute(
            "UPDATE api_keys SET revoked_ms = COALESCE(revoked_ms, ?2) WHERE key_id = ?1",
            params![key_id.as_str(), now_ms()],
        )?;
        Ok(changed > 0)
    }

    pub fn count(&self) -> Result<u64, GatewayError> {
        Ok(self
            .conn()
            .query_row("SELECT COUNT(*) FROM api_keys", [], |r| r.get(0))?)
    }

    /// The key's record if `presented` is a live key. Every failure is the same
    /// `InvalidKey`, and the presented text is never put into an error or a log.
    pub fn authenticate(&self, presented: &str) -> Result<KeyRecord, GatewayError> {
        let (key_id, secret) = secret::parse(presented).ok_or(GatewayError::InvalidKey)?;
        let presented_hash = secret::hash(&key_id, secret);
        let row = {
            let conn = self.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT tenant, name, hash, created_ms, expires_ms, revoked_ms
                 FROM api_keys WHERE key_id = ?1",
            )?;
            stmt.query_row([key_id.as_str()], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                    r.get::<_, Option<i64>>(5)?,
                ))
            })
            .optional()?
        };
        let (tenant, name, stored_hash, created_ms, expires_ms, revoked_ms) =
            row.ok_or(GatewayError::InvalidKey)?;
        if !secret::hashes_equal(&presented_hash, &stored_hash) {
            return Err(GatewayError::InvalidKey);
        }
        let now = now_ms();
        let record = KeyRecord {
            key_id,
            tenant: TenantId::new(tenant),
            name,
            created_ms,
            expires_ms,
            revoked_ms,
            last_used_ms: Some(now),
        };
        if !record.is_usable(now) {
            return Err(GatewayError::InvalidKey);
        }
        self.touch(&record.key_id, now)?;
        Ok(record)
    }
}

fn record_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyRecord> {
    Ok(KeyRecord {
        key_id: KeyId::new(r.get::<_, String>(0)?),
        tenant: TenantId::new(r.get::<_, String>(1)?),
        name: r.get(2)?,
        created_ms: r.get(3)?,
        expires_ms: r.get(4)?,
        revoked_ms: r.get(5)?,
        last_used_ms: r.get(6)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_authenticate_until_revoked_and_only_hashes_are_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gw.db");
        let store = KeyStore::open(&path).unwrap();
        let tenant = TenantId::new("acme");
        let (record, key) = store.create(&tenant, Some("ci"), None).unwrap();
        assert_eq!(store.authenticate(key.reveal()).unwrap().tenant, tenant);
        // A key with the right id and a wrong secret fails.
        let mut forged = key.reveal().to_string();
        forged.replace_range(
            forged.len() - 1..,
            if forged.ends_with('0') { "1" } else { "0" },
        );
        assert!(matches!(
            store.authenticate(&forged),
            Err(GatewayError::InvalidKey)
        ));
        // The database file never contains the secret.
        let (_, secret) = secret::parse(key.reveal()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
        for file in [bytes, wal] {
            assert!(!file.windows(secret.len()).any(|w| w == secret.as_bytes()));
        }
        assert!(store.revoke(&record.key_id).unwrap());
        assert!(matches!(
            store.authenticate(key.reveal()),
            Err(GatewayError::InvalidKey)
        ));
        assert!(!store.revoke(&KeyId::new("nope")).unwrap());
    }

    #[test]
    fn expired_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::open(&dir.path().join("gw.db")).unwrap();
        let (record, key) = store
            .create(&TenantId::new("t"), None, Some(now_ms() + 60_000))
            .unwrap();
        assert!(store.authenticate(key.reveal()).is_ok());
        store
            .conn()
            .execute(
                "UPDATE api_keys SET expires_ms = ?2 WHERE key_id = ?1",
                params![record.key_id.as_str(), now_ms() - 1],
            )
            .unwrap();
        assert!(matches!(
            store.authenticate(key.reveal()),
            Err(GatewayError::InvalidKey)
        ));
        assert!(store.create(&TenantId::new("t"), None, Some(1)).is_err());
    }

    #[test]
    fn last_use_is_recorded_and_old_databases_gain_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gw.db");
        // A database from before `last_used_ms` existed.
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE api_keys (key_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT,
                 hash TEXT NOT NULL, created_ms INTEGER NOT NULL, expires_ms INTEGER,
                 revoked_ms INTEGER)",
            )
            .unwrap();
        let store = KeyStore::open(&path).unwrap();
        let (record, key) = store.create(&TenantId::new("t"), None, None).unwrap();
        assert_eq!(
            store.get(&record.key_id).unwrap().unwrap().last_used_ms,
            None
        );
        let before = now_ms();
        store.authenticate(key.reveal()).unwrap();
        let used = store
            .get(&record.key_id)
            .unwrap()
            .unwrap()
            .last_used_ms
            .unwrap();
        assert!(used >= before);
        // Within the minute, a second use does not write again.
        store.authenticate(key.reveal()).unwrap();
        assert_eq!(store.list().unwrap()[0].last_used_ms, Some(used));
        // Reopening (a second replica) finds the column in place.
        assert!(KeyStore::open(&path)
            .unwrap()
            .get(&KeyId::new("nope"))
            .unwrap()
            .is_none());
    }
}
