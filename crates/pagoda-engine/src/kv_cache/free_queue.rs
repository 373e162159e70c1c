//! An O(1) doubly-linked LRU queue of free KV blocks.
//!
//! The links live in two arrays indexed by block id (intrusive: no node allocation per
//! operation). The front is the least recently freed block, the next one handed out; the back is
//! the most recently freed one. A free block that still holds a cached prefix can be taken out of
//! the middle when a new request revives it.

use crate::ids::BlockId;

#[derive(Clone, Copy, Debug, Default)]
struct Link {
    prev: Option<BlockId>,
    next: Option<BlockId>,
    queued: bool,
}

/// The free-block queue. Every block id below `capacity` is either in it or not; the queue never
/// holds a block twice.
#[derive(Clone, Debug)]
pub struct FreeQueue {
    links: Vec<Link>,
    head: Option<BlockId>,
    tail: Option<BlockId>,
    len: usize,
}

impl FreeQueue {
    /// A queue over `capacity` blocks holding all of them, in id order.
    pub fn full(capacity: usize) -> Self {
        let mut queue = Self::empty(capacity);
        for id in 0..capacity {
            queue.push_back(BlockId(id as u32));
        }
        queue
    }

    /// A queue over `capacity` blocks holding none.
    pub fn empty(capacity: usize) -> Self {
        assert!(
            capacity <= u32::MAX as usize,
            "too many blocks for 32-bit ids"
        );
        Self {
            links: vec![Link::default(); capacity],
            head: None,
            tail: None,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, id: BlockId) -> bool {
        self.links[id.index()].queued
    }

    /// Appends `id` as the most recently freed block.
    ///
    /// # Panics
    /// If `id` is already queued: that would be a double free.
    pub fn push_back(&mut self, id: BlockId) {
        assert!(!self.contains(id), "{id} is already in the free queue");
        let old_tail = self.tail;
        self.links[id.index()] = Link {
            prev: old_tail,
            next: None,
            queued: true,
        };
        match old_tail {
            Some(tail) => self.links[tail.index()].next = Some(id),
            None => self.head = Some(id),
        }
        self.tail = Some(id);
        self.len += 1;
    }

    /// Takes the least recently freed block.
    pub fn pop_front(&mut self) -> Option<BlockId> {
        let id = self.head?;
        self.remove(id);
        Some(id)
    }

    /// Takes `id` out of the queue wherever it is.
    ///
    /// # Panics
    /// If `id` is not queued.
    pub fn remove(&mut self, id: BlockId) {
        let link = self.links[id.index()];
        assert!(link.queued, "{id} is not in the free queue");
        match link.prev {
            Some(prev) => self.links[prev.index()].next = link.next,
            None => self.head = link.next,
        }
        match link.next {
            Some(next) => self.links[next.index()].prev = link.prev,
            None => self.tail = link.prev,
        }
        self.links[id.index()] = Link::default();
        self.len -= 1;
    }

    /// The queued blocks from front (next to be reused) to back.
    pub fn iter(&self) -> impl Iterator<Item = BlockId> + '_ {
        std::iter::successors(self.head, |id| self.links[id.index()].next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(queue: &FreeQueue) -> Vec<u32> {
        queue.iter().map(|b| b.0).collect()
    }

    #[test]
    fn a_full_queue_hands_out_blocks_in_id_order() {
        let mut queue = FreeQueue::full(4);
        assert_eq!(ids(&queue), [0, 1, 2, 3]);
        assert_eq!(queue.pop_front(), Some(BlockId(0)));
        assert_eq!(queue.pop_front(), Some(BlockId(1)));
        assert_eq!(ids(&queue), [2, 3]);
        assert_eq!(queue.len(), 2);
    }

    #[test]
    fn freed_blocks_go_to_the_back() {
        let mut queue = FreeQueue::full(3);
        let first = queue.pop_front().unwrap();
        queue.push_back(first);
        assert_eq!(ids(&queue), [1, 2, 0]);
    }

    #[test]
    fn removing_from_the_middle_front_and_back_keeps_the_links() {
        let mut queue = FreeQueue::full(5);
        queue.remove(BlockId(2));
        assert_eq!(ids(&queue), [0, 1, 3, 4]);
        queue.remove(BlockId(0));
        assert_eq!(ids(&queue), [1, 3, 4]);
        queue.remove(BlockId(4));
        assert_eq!(ids(&queue), [1, 3]);
        queue.push_back(BlockId(2));
        assert_eq!(ids(&queue), [1, 3, 2]);
        assert!(!queue.contains(BlockId(0)));
        assert_eq!(queue.len(), 3);
    }

    #[test]
    fn an_emptied_queue_pops_nothing_and_refills() {
        let mut queue = FreeQueue::full(2);
        queue.pop_front();
        queue.pop_front();
        assert!(queue.is_empty());
        assert_eq!(queue.pop_front(), None);
        queue.push_back(BlockId(1));
        assert_eq!(ids(&queue), [1]);
    }

    #[test]
    #[should_panic(expected = "already in the free queue")]
    fn pushing_a_queued_block_is_a_double_free() {
        let mut queue = FreeQueue::full(2);
        queue.push_back(BlockId(0));
    }
}
