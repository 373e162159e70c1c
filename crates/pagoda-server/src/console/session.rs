//! Console sign-ins: a random session id in an HttpOnly, SameSite=Strict cookie, and beside
//! it on the server the admin key it was opened with and a CSRF token that every form posts
//! back. The key itself is never kept: each request re-checks that its id is still live and
//! its tenant still an admin, so revoking the key or the tenant's admin flag ends the session.

use std::collections::HashMap;
use std::sync::Mutex;

use pagoda_gateway::{clock::now_ms, random_hex, KeyId, TenantId};

/// A session unused this long is dropped.
const IDLE_MS: i64 = 8 * 3600 * 1000;
/// Sessions kept at most; the oldest go first (sign-ins need an admin key, so this only
/// bounds memory against a flood of them).
const MAX_SESSIONS: usize = 1024;
pub const COOKIE: &str = "pagoda_console";

#[derive(Clone, Debug)]
pub struct Session {
    pub tenant: TenantId,
    pub key_id: KeyId,
    pub csrf: String,
    last_seen_ms: i64,
}

#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// Opens a session; returns its id (the cookie value).
    pub fn open(&self, tenant: TenantId, key_id: KeyId) -> String {
        let id = random_hex(32);
        let now = now_ms();
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, s| now - s.last_seen_ms < IDLE_MS);
        while map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| s.last_seen_ms)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => map.remove(&k),
                None => break,
            };
        }
        map.insert(
            id.clone(),
            Session {
                tenant,
                key_id,
                csrf: random_hex(32),
                last_seen_ms: now,
            },
        );
        id
    }

    /// The live session `id` names, refreshed.
    pub fn get(&self, id: &str) -> Option<Session> {
        let now = now_ms();
        let mut map = self.by_id.lock().unwrap_or_else(|e| e.into_inner());
        let session = map.get_mut(id)?;
        if now - session.last_seen_ms >= IDLE_MS {
            map.remove(id);
            return None;
        }
        session.last_seen_ms = now;
        Some(session.clone())
    }

    pub fn close(&self, id: &str) {
        self.by_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
}

/// The session id in a `Cookie` header, if any.
pub fn cookie_value(header: &str) -> Option<&str> {
    header.split(';').find_map(|part| {
        let (name, value) = part.trim().split_once('=')?;
        (name == COOKIE && !value.is_empty()).then_some(value)
    })
}

/// The `Set-Cookie` value that opens a session (no `Secure`: the server speaks plain HTTP;
/// behind TLS the proxy may add it).
pub fn set_cookie(id: &str) -> String {
    format!("{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=28800")
}

pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// Equal without an early exit, so a CSRF token cannot be guessed byte by byte.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_open_find_and_close() {
        let sessions = Sessions::default();
        let id = sessions.open(TenantId::new("root"), KeyId::new("k"));
        let s = sessions.get(&id).unwrap();
        assert_eq!(s.tenant.as_str(), "root");
        assert_eq!(s.csrf.len(), 64);
        assert!(sessions.get("nope").is_none());
        sessions.close(&id);
        assert!(sessions.get(&id).is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let header = format!("a=1; {COOKIE}=abc; b=2");
        assert_eq!(cookie_value(&header), Some("abc"));
        assert_eq!(cookie_value("a=1"), None);
        assert_eq!(cookie_value(&format!("{COOKIE}=")), None);
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "ab"));
    }
}
