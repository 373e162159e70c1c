//! Sequences submitted and not yet finished, in total and per tenant. `submit` reserves one
//! `PendingSlot` per sequence; the engine keeps it with the sequence and dropping it gives the
//! place back, however the sequence ends (finished, aborted, failed, or the engine gone).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pagoda_engine::TenantKey;

use crate::error::{Result, RuntimeError};

#[derive(Debug)]
pub(crate) struct PendingCounts {
    max_total: usize,
    max_per_tenant: usize,
    /// `None` is the anonymous tenant.
    per_tenant: Mutex<HashMap<Option<TenantKey>, usize>>,
    /// Changed under the `per_tenant` lock; read without it.
    total: AtomicUsize,
}

/// One pending sequence's place in the counts.
#[derive(Debug)]
pub(crate) struct PendingSlot {
    counts: Arc<PendingCounts>,
    tenant: Option<TenantKey>,
}

impl PendingCounts {
    pub fn new(max_total: usize, max_per_tenant: usize) -> Arc<Self> {
        Arc::new(PendingCounts {
            max_total,
            max_per_tenant,
            per_tenant: Mutex::new(HashMap::new()),
            total: AtomicUsize::new(0),
        })
    }

    pub fn max_total(&self) -> usize {
        self.max_total
    }

    pub fn max_per_tenant(&self) -> usize {
        self.max_per_tenant
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::SeqCst)
    }

    pub fn of_tenant(&self, tenant: Option<&TenantKey>) -> usize {
        let per_tenant = self.per_tenant.lock().unwrap_or_else(|e| e.into_inner());
        per_tenant.get(&tenant.cloned()).copied().unwrap_or(0)
    }

    /// Places for `n` sequences of `tenant`, or why not: the tenant's own limit first (its
    /// own doing), then the engine's.
    pub fn reserve(
        self: &Arc<Self>,
        tenant: Option<&TenantKey>,
        n: usize,
    ) -> Result<Vec<PendingSlot>> {
        let mut per_tenant = self.per_tenant.lock().unwrap_or_else(|e| e.into_inner());
        let key = tenant.cloned();
        let mine = per_tenant.get(&key).copied().unwrap_or(0);
        if mine.checked_add(n).is_none_or(|m| m > self.max_per_tenant) {
            return Err(RuntimeError::TenantQueueFull {
                limit: self.max_per_tenant,
            });
        }
        let total = self.total.load(Ordering::SeqCst);
        if total.checked_add(n).is_none_or(|t| t > self.max_total) {
            return Err(RuntimeError::QueueFull {
                limit: self.max_total,
            });
        }
        per_tenant.insert(key.clone(), mine + n);
        self.total.store(total + n, Ordering::SeqCst);
        Ok((0..n)
            .map(|_| PendingSlot {
                counts: self.clone(),
                tenant: key.clone(),
            })
            .collect())
    }

    fn release(&self, tenant: &Option<TenantKey>) {
        let mut per_tenant = self.per_tenant.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = per_tenant.get_mut(tenant) {
            *count -= 1;
            if *count == 0 {
                per_tenant.remove(tenant);
            }
        }
        self.total.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.counts.release(&self.tenant);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_is_held_to_its_share_and_everyone_to_the_total() {
        let counts = PendingCounts::new(5, 3);
        let a = TenantKey::new("a");
        let b = TenantKey::new("b");
        let first = counts.reserve(Some(&a), 2).unwrap();
        assert!(matches!(
            counts.reserve(Some(&a), 2),
            Err(RuntimeError::TenantQueueFull { limit: 3 })
        ));
        let second = counts.reserve(Some(&b), 3).unwrap();
        assert!(matches!(
            counts.reserve(None, 1),
            Err(RuntimeError::QueueFull { limit: 5 })
        ));
        assert_eq!((counts.total(), counts.of_tenant(Some(&a))), (5, 2));
        drop(first);
        assert_eq!((counts.total(), counts.of_tenant(Some(&a))), (3, 0));
        let anonymous = counts.reserve(None, 2).unwrap();
        assert_eq!(counts.of_tenant(None), 2);
        drop((second, anonymous));
        assert_eq!(counts.total(), 0);
        assert!(counts.per_tenant.lock().unwrap().is_empty());
    }

    #[test]
    fn an_oversized_reservation_is_refused_without_overflow() {
        let counts = PendingCounts::new(usize::MAX, usize::MAX);
        let _one = counts.reserve(None, 1).unwrap();
        assert!(counts.reserve(None, usize::MAX).is_err());
        assert_eq!(counts.total(), 1);
    }
}
