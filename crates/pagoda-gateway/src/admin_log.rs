//! Who changed what through an admin interface (the console's key creation and revocation,
//! the CLI's): one row per action in the gateway database, beside the keys it changed. Rows
//! name keys by id and tenants by name; a key's secret never reaches this table.

use rusqlite::params;

use crate::clock::now_ms;
use crate::error::GatewayError;
use crate::keys::KeyStore;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminAction {
    pub ts_ms: i64,
    /// The tenant of the key that acted (`cli` for the command line).
    pub actor_tenant: String,
    /// That key's id (empty for the command line).
    pub actor_key: String,
    /// `key.create`, `key.revoke`, `console.sign_in`, ...
    pub action: String,
    /// What it acted on, e.g. `key 1a2b... of tenant acme`.
    pub target: String,
}

impl KeyStore {
    pub fn record_action(
        &self,
        actor_tenant: &str,
        actor_key: &str,
        action: &str,
        target: &str,
    ) -> Result<(), GatewayError> {
        self.conn().execute(
            "INSERT INTO admin_actions (ts_ms, actor_tenant, actor_key, action, target)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![now_ms(), actor_tenant, actor_key, action, target],
        )?;
        Ok(())
    }

    /// The latest `limit` actions, newest first.
    pub fn recent_actions(&self, limit: usize) -> Result<Vec<AdminAction>, GatewayError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT ts_ms, actor_tenant, actor_key, action, target FROM admin_actions
             ORDER BY ts_ms DESC, rowid DESC LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit.min(10_000) as i64], |r| {
            Ok(AdminAction {
                ts_ms: r.get(0)?,
                actor_tenant: r.get(1)?,
                actor_key: r.get(2)?,
                action: r.get(3)?,
                target: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    use crate::ids::TenantId;
    use crate::keys::KeyStore;

    #[test]
    fn actions_are_listed_newest_first_without_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let store = KeyStore::open(&dir.path().join("gw.db")).unwrap();
        let (record, key) = store.create(&TenantId::new("acme"), None, None).unwrap();
        let target = format!("key {} of tenant acme", record.key_id);
        store
            .record_action("root", "k1", "key.create", &target)
            .unwrap();
        store
            .record_action("root", "k1", "key.revoke", &target)
            .unwrap();
        let actions = store.recent_actions(10).unwrap();
        let names: Vec<_> = actions.iter().map(|a| a.action.as_str()).collect();
        assert_eq!(names, ["key.revoke", "key.create"]);
        assert_eq!(store.recent_actions(1).unwrap().len(), 1);
        assert!(actions
            .iter()
            .all(|a| !format!("{a:?}").contains(key.reveal())));
    }
}
