//! The waiting queue: by priority class first (lower value first), and within a class shared
//! between tenants. The next request is the head of the tenant with the fewest running
//! sequences in that class (ties: the earlier head), so tenants take turns instead of the first
//! to flood the queue being served first. With one tenant this is plain arrival order.

use crate::ids::{RequestId, TenantKey};
use std::collections::{BTreeMap, HashMap};

/// A priority class and a tenant in it: the unit fair sharing counts running sequences by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TenantSlot {
    pub priority: i32,
    /// `None` is the anonymous tenant, one group of its own.
    pub tenant: Option<TenantKey>,
}

/// A request's place in the waiting queue. Arrival is kept across preemption, so a preempted
/// request goes back to where it stood in its tenant's queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct QueueKey {
    pub slot: TenantSlot,
    pub arrival: u64,
}

/// Per priority class, per tenant, requests by arrival.
type Classes = BTreeMap<i32, HashMap<Option<TenantKey>, BTreeMap<u64, RequestId>>>;

#[derive(Clone, Debug, Default)]
pub(crate) struct WaitingQueue {
    classes: Classes,
    len: usize,
}

impl WaitingQueue {
    pub fn push(&mut self, key: QueueKey, id: RequestId) {
        let previous = self
            .classes
            .entry(key.slot.priority)
            .or_default()
            .entry(key.slot.tenant)
            .or_default()
            .insert(key.arrival, id);
        debug_assert!(previous.is_none(), "two requests share one arrival");
        if previous.is_none() {
            self.len += 1;
        }
    }

    pub fn remove(&mut self, key: &QueueKey) -> Option<RequestId> {
        let class = self.classes.get_mut(&key.slot.priority)?;
        let queue = class.get_mut(&key.slot.tenant)?;
        let id = queue.remove(&key.arrival)?;
        if queue.is_empty() {
            class.remove(&key.slot.tenant);
            if class.is_empty() {
                self.classes.remove(&key.slot.priority);
            }
        }
        self.len -= 1;
        Some(id)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The next request to admit, given `load(slot)`: the running sequences of a tenant in a
    /// class.
    pub fn next(&self, load: impl Fn(&TenantSlot) -> usize) -> Option<(QueueKey, RequestId)> {
        let (&priority, class) = self.classes.iter().next()?;
        class
            .iter()
            .filter_map(|(tenant, queue)| {
                let (&arrival, &id) = queue.iter().next()?;
                let slot = TenantSlot {
                    priority,
                    tenant: tenant.clone(),
                };
                Some((load(&slot), QueueKey { slot, arrival }, id))
            })
            .min_by_key(|(load, key, _)| (*load, key.arrival))
            .map(|(_, key, id)| (key, id))
    }

    /// The first waiting request of every tenant in every class.
    pub fn heads(&self) -> impl Iterator<Item = (QueueKey, RequestId)> + '_ {
        self.classes.iter().flat_map(|(&priority, class)| {
            class.iter().filter_map(move |(tenant, queue)| {
                let (&arrival, &id) = queue.iter().next()?;
                let slot = TenantSlot {
                    priority,
                    tenant: tenant.clone(),
                };
                Some((QueueKey { slot, arrival }, id))
            })
        })
    }

    /// Every waiting request in the order `next` would admit them if each admission added one
    /// to its tenant's load and nothing else changed.
    pub fn order(&self, load: impl Fn(&TenantSlot) -> usize) -> Vec<RequestId> {
        let mut queue = self.clone();
        let mut admitted: HashMap<TenantSlot, usize> = HashMap::new();
        let mut order = Vec::with_capacity(self.len);
        while let Some((key, id)) =
            queue.next(|slot| load(slot) + admitted.get(slot).copied().unwrap_or(0))
        {
            queue.remove(&key);
            *admitted.entry(key.slot).or_default() += 1;
            order.push(id);
        }
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(priority: i32, tenant: Option<&str>, arrival: u64) -> QueueKey {
        QueueKey {
            slot: TenantSlot {
                priority,
                tenant: tenant.map(TenantKey::new),
            },
            arrival,
        }
    }

    fn no_load(_: &TenantSlot) -> usize {
        0
    }

    #[test]
    fn lower_priority_values_come_first_then_earlier_arrivals() {
        let mut queue = WaitingQueue::default();
        queue.push(key(1, None, 0), RequestId(10));
        queue.push(key(0, None, 2), RequestId(12));
        queue.push(key(0, None, 1), RequestId(11));
        assert_eq!(
            queue.order(no_load),
            [RequestId(11), RequestId(12), RequestId(10)]
        );
        assert_eq!(queue.next(no_load).unwrap().1, RequestId(11));
        assert_eq!(queue.remove(&key(0, None, 1)), Some(RequestId(11)));
        assert_eq!(queue.remove(&key(1, None, 0)), Some(RequestId(10)));
        assert_eq!(queue.remove(&key(1, None, 0)), None);
        assert_eq!(queue.next(no_load).unwrap().1, RequestId(12));
        assert_eq!(queue.len(), 1);
    }

    #[test]
    fn tenants_take_turns_within_a_class() {
        let mut queue = WaitingQueue::default();
        for arrival in 0..3 {
            queue.push(key(0, Some("a"), arrival), RequestId(arrival));
        }
        for arrival in 3..5 {
            queue.push(key(0, Some("b"), arrival), RequestId(arrival));
        }
        queue.push(key(0, None, 5), RequestId(5));
        let order: Vec<u64> = queue.order(no_load).iter().map(|id| id.0).collect();
        assert_eq!(order, [0, 3, 5, 1, 4, 2]);
    }

    #[test]
    fn the_tenant_running_least_goes_first() {
        let mut queue = WaitingQueue::default();
        queue.push(key(0, Some("a"), 0), RequestId(0));
        queue.push(key(0, Some("b"), 1), RequestId(1));
        let a_runs_two = |slot: &TenantSlot| {
            usize::from(slot.tenant.as_ref().is_some_and(|t| t.as_str() == "a")) * 2
        };
        assert_eq!(queue.next(a_runs_two).unwrap().1, RequestId(1));
        assert_eq!(queue.next(no_load).unwrap().1, RequestId(0));
        assert_eq!(queue.heads().count(), 2);
    }
}
