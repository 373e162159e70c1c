//! The waiting queue, ordered by (priority ascending, arrival ascending).

use crate::ids::RequestId;
use std::collections::BTreeMap;

/// A request's place in the waiting queue. Arrival is kept across preemption, so a preempted
/// request goes back to where it stood.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct QueueKey {
    pub priority: i32,
    pub arrival: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct WaitingQueue {
    entries: BTreeMap<QueueKey, RequestId>,
}

impl WaitingQueue {
    pub fn push(&mut self, key: QueueKey, id: RequestId) {
        let previous = self.entries.insert(key, id);
        debug_assert!(previous.is_none(), "two requests share queue key {key:?}");
    }

    pub fn peek(&self) -> Option<RequestId> {
        self.entries.values().next().copied()
    }

    pub fn pop(&mut self) -> Option<RequestId> {
        self.entries.pop_first().map(|(_, id)| id)
    }

    pub fn remove(&mut self, key: QueueKey) -> Option<RequestId> {
        self.entries.remove(&key)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn ids(&self) -> impl Iterator<Item = RequestId> + '_ {
        self.entries.values().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(priority: i32, arrival: u64) -> QueueKey {
        QueueKey { priority, arrival }
    }

    #[test]
    fn lower_priority_values_come_first_then_earlier_arrivals() {
        let mut queue = WaitingQueue::default();
        queue.push(key(1, 0), RequestId(10));
        queue.push(key(0, 2), RequestId(12));
        queue.push(key(0, 1), RequestId(11));
        assert_eq!(
            queue.ids().collect::<Vec<_>>(),
            [RequestId(11), RequestId(12), RequestId(10)]
        );
        assert_eq!(queue.pop(), Some(RequestId(11)));
        assert_eq!(queue.remove(key(1, 0)), Some(RequestId(10)));
        assert_eq!(queue.peek(), Some(RequestId(12)));
        assert_eq!(queue.len(), 1);
    }
}
