//! The kernels' own threads. A forward pass runs a hundred or more parallel loops per token,
//! tens of microseconds apart. Rayon's idle workers sleep after a few dozen yields, and the
//! thread that waits for a loop's last task sleeps too, so nearly every loop paid a futex
//! wake on each side (130 context switches a token in two-thread decode, about a quarter of
//! its time on a 2-vCPU VM). Here the caller runs tasks alongside the helpers and spins until
//! the loop is done, and helpers spin for `SPIN` between loops before they park, as
//! llama.cpp's threads do between graph nodes.
//!
//! Tasks are claimed one index at a time from a shared counter; which thread runs a task
//! never changes what it computes, so outputs stay the same bits on any thread count.

use std::any::Any;
use std::cell::Cell;
use std::hint::spin_loop;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::SeqCst};
use std::sync::{Condvar, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// How long an idle helper keeps polling for the next loop before it parks: longer than the
/// gaps inside a forward pass (norms, attention set-up), short enough that an idle server
/// leaves its cores alone.
const SPIN: Duration = Duration::from_millis(2);

/// Pure spinning before each poll also yields the core, for the first microseconds of a gap.
const SPIN_WITHOUT_YIELD: Duration = Duration::from_micros(20);

/// One parallel loop, on the stack of the thread that runs it.
struct Region<'a> {
    task: &'a (dyn Fn(usize) + Sync),
    count: usize,
}

struct Shared {
    /// The open loop, or null. Set after `next` and `finished` are reset for it.
    region: AtomicPtr<Region<'static>>,
    /// Bumped when a loop opens, so helpers know to look.
    generation: AtomicUsize,
    /// The next task index to claim.
    next: AtomicUsize,
    /// Tasks finished (a panicked task counts as finished).
    finished: AtomicUsize,
    /// Helpers that may still read `region`: the owner returns only at zero.
    inside: AtomicUsize,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

struct Pool {
    shared: &'static Shared,
    helpers: usize,
    /// Held by the thread running a loop; another thread that finds it held runs its loop
    /// alone (tests run many models at once; a server has one engine thread).
    owner: Mutex<()>,
}

thread_local! {
    /// Set on helpers and on a thread while it runs a loop: a loop inside a task runs inline.
    static IN_LOOP: Cell<bool> = const { Cell::new(false) };
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        // `RAYON_NUM_THREADS` when set, else every core, as before this pool existed.
        let threads = rayon::current_num_threads().max(1);
        let shared: &'static Shared = Box::leak(Box::new(Shared {
            region: AtomicPtr::new(null_mut()),
            generation: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            finished: AtomicUsize::new(0),
            inside: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            panic: Mutex::new(None),
        }));
        let mut helpers = 0;
        for k in 1..threads {
            let spawned = std::thread::Builder::new()
                .name(format!("pagoda-kernels-{k}"))
                .spawn(move || help(shared));
            // Without a helper the loops still run, on fewer threads.
            if spawned.is_ok() {
                helpers += 1;
            }
        }
        Pool {
            shared,
            helpers,
            owner: Mutex::new(()),
        }
    })
}

/// How many threads the kernels' loops run on.
pub fn threads() -> usize {
    pool().helpers + 1
}

/// Runs `task(i)` for every `i` in `0..count`, on the calling thread and the helpers, and
/// returns when all are done. A panic in any task is raised here after every task ended.
pub(super) fn for_each(count: usize, task: impl Fn(usize) + Sync) {
    let pool = pool();
    if count <= 1 || pool.helpers == 0 || IN_LOOP.get() {
        return alone(count, &task);
    }
    let _owner = match pool.owner.try_lock() {
        Ok(owner) => owner,
        // A task's panic passed through the last owner; the pool itself is fine.
        Err(TryLockError::Poisoned(owner)) => owner.into_inner(),
        Err(TryLockError::WouldBlock) => return alone(count, &task),
    };
    let _in_loop = InLoop::enter();
    let region = Region { task: &task, count };
    let s = pool.shared;
    s.next.store(0, SeqCst);
    s.finished.store(0, SeqCst);
    s.region
        .store((&region as *const Region<'_>).cast_mut().cast(), SeqCst);
    s.generation.fetch_add(1, SeqCst);
    if s.sleepers.load(SeqCst) > 0 {
        let _lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
        s.wake.notify_all();
    }
    work(s, &region);
    while s.finished.load(SeqCst) < count {
        spin_loop();
    }
    // No helper may read `region` once this returns.
    s.region.store(null_mut(), SeqCst);
    while s.inside.load(SeqCst) > 0 {
        spin_loop();
    }
    let panic = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}

/// Task indices `0..count` (in column order) reordered so that consecutive ones, which the
/// threads claim at the same time, lie `1 / threads` of the columns apart: the thread count's
/// contiguous ranges, interleaved. Neighbouring tasks write neighbouring cache lines of
/// every token's output row; run at once on two threads, the lines one thread's stores
/// (and the hardware's prefetches around them) brought in, the other wanted next, and the
/// 896-wide Q8_0 products ran 1.7 times as fast on two threads as on one (the 4864-wide one
/// twice as fast; docs/benchmarks.md).
pub(super) fn far_apart(count: usize, threads: usize) -> Vec<usize> {
    let per_range = count.div_ceil(threads.max(1));
    (0..per_range)
        .flat_map(|j| (0..threads).map(move |r| r * per_range + j))
        .filter(|&i| i < count)
        .collect()
}

/// The loop on this thread only, with the same promise about panics.
fn alone(count: usize, task: &(dyn Fn(usize) + Sync)) {
    let mut panic = None;
    for i in 0..count {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task(i))) {
            panic = Some(payload);
        }
    }
    if let Some(payload) = panic {
        resume_unwind(payload);
    }
}

/// Claims and runs tasks of `region` until none is left.
fn work(s: &Shared, region: &Region<'_>) {
    loop {
        let i = s.next.fetch_add(1, SeqCst);
        if i >= region.count {
            return;
        }
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| (region.task)(i))) {
            *s.panic.lock().unwrap_or_else(|e| e.into_inner()) = Some(payload);
        }
        s.finished.fetch_add(1, SeqCst);
    }
}

fn help(s: &'static Shared) {
    IN_LOOP.set(true);
    let mut seen = s.generation.load(SeqCst);
    loop {
        seen = next_generation(s, seen);
        s.inside.fetch_add(1, SeqCst);
        // Still the loop that woke us (else look again): its owner cannot return while
        // `inside` counts us, so `region` is either that loop's or null.
        if s.generation.load(SeqCst) == seen {
            let region = s.region.load(SeqCst);
            if !region.is_null() {
                // SAFETY: non-null `region` points at a live loop whose owner waits for
                // `inside` to reach zero before its stack frame ends.
                work(s, unsafe { &*region });
            }
        }
        s.inside.fetch_sub(1, SeqCst);
    }
}

/// Waits for a generation other than `seen`: spinning, then yielding between polls, then
/// parked until a loop opens.
fn next_generation(s: &Shared, seen: usize) -> usize {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            let g = s.generation.load(SeqCst);
            if g != seen {
                return g;
            }
            spin_loop();
        }
        let waited = start.elapsed();
        if waited > SPIN {
            break;
        }
        if waited > SPIN_WITHOUT_YIELD {
            std::thread::yield_now();
        }
    }
    let mut lock = s.lock.lock().unwrap_or_else(|e| e.into_inner());
    s.sleepers.fetch_add(1, SeqCst);
    loop {
        let g = s.generation.load(SeqCst);
        if g != seen {
            s.sleepers.fetch_sub(1, SeqCst);
            return g;
        }
        lock = s.wake.wait(lock).unwrap_or_else(|e| e.into_inner());
    }
}

/// Marks the thread as inside a loop until dropped (also when a task's panic unwinds).
struct InLoop;

impl InLoop {
    fn enter() -> InLoop {
        IN_LOOP.set(true);
        InLoop
    }
}

impl Drop for InLoop {
    fn drop(&mut self) {
        IN_LOOP.set(false);
    }
}

/// A slice cut into chunks of `chunk` elements (the last may be short) that tasks write,
/// each chunk by one task.
pub(super) struct Chunks<'a, T> {
    ptr: *mut T,
    len: usize,
    chunk: usize,
    _slice: PhantomData<&'a mut [T]>,
}

// SAFETY: tasks reach disjoint chunks only (`get`'s contract).
unsafe impl<T: Send> Send for Chunks<'_, T> {}
unsafe impl<T: Send> Sync for Chunks<'_, T> {}

impl<'a, T> Chunks<'a, T> {
    pub(super) fn new(slice: &'a mut [T], chunk: usize) -> Self {
        assert!(chunk > 0, "chunks of at least one element");
        Chunks {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            chunk,
            _slice: PhantomData,
        }
    }

    pub(super) fn count(&self) -> usize {
        self.len.div_ceil(self.chunk)
    }

    /// Chunk `i`.
    ///
    /// # Safety
    /// No two live references to the same chunk: each task takes only its own.
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn get(&self, i: usize) -> &'a mut [T] {
        assert!(i < self.count(), "chunk {i} of {}", self.count());
        let start = i * self.chunk;
        std::slice::from_raw_parts_mut(self.ptr.add(start), self.chunk.min(self.len - start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_claimed_together_lie_far_apart_and_each_comes_once() {
        assert_eq!(far_apart(7, 1), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(far_apart(7, 2), [0, 4, 1, 5, 2, 6, 3]);
        assert_eq!(far_apart(7, 3), [0, 3, 6, 1, 4, 2, 5]);
        assert_eq!(far_apart(7, 8), [0, 1, 2, 3, 4, 5, 6]);
        assert!(far_apart(0, 2).is_empty());
    }

    #[test]
    fn every_index_runs_once_and_loops_nest() {
        for count in [0, 1, 2, 3, 17, 1000] {
            let hits: Vec<AtomicUsize> = (0..count).map(|_| AtomicUsize::new(0)).collect();
            for_each(count, |i| {
                hits[i].fetch_add(1, SeqCst);
                // A loop inside a task runs inline, and still runs every index.
                let inner = AtomicUsize::new(0);
                for_each(3, |_| {
                    inner.fetch_add(1, SeqCst);
                });
                assert_eq!(inner.load(SeqCst), 3);
            });
            assert!(hits.iter().all(|h| h.load(SeqCst) == 1), "count {count}");
        }
    }

    #[test]
    fn loops_from_many_threads_at_once_all_finish() {
        std::thread::scope(|s| {
            for t in 0..4 {
                s.spawn(move || {
                    for round in 0..200 {
                        let sum = AtomicUsize::new(0);
                        for_each(37, |i| {
                            sum.fetch_add(i + t + round, SeqCst);
                        });
                        assert_eq!(sum.load(SeqCst), 37 * 36 / 2 + 37 * (t + round));
                    }
                });
            }
        });
    }

    #[test]
    fn a_panicking_task_reaches_the_caller_after_the_others_end() {
        let ran = AtomicUsize::new(0);
        let caught = catch_unwind(AssertUnwindSafe(|| {
            for_each(64, |i| {
                ran.fetch_add(1, SeqCst);
                assert!(i != 5, "task five fails");
            })
        }));
        assert!(caught.is_err());
        assert_eq!(ran.load(SeqCst), 64);
        // The pool still works afterwards.
        let sum = AtomicUsize::new(0);
        for_each(10, |i| {
            sum.fetch_add(i, SeqCst);
        });
        assert_eq!(sum.load(SeqCst), 45);
    }

    #[test]
    fn chunks_cover_the_slice_with_a_short_last_one() {
        let mut v = vec![0u32; 10];
        let chunks = Chunks::new(&mut v, 4);
        assert_eq!(chunks.count(), 3);
        for_each(chunks.count(), |i| {
            // SAFETY: each index is one task.
            for x in unsafe { chunks.get(i) } {
                *x = i as u32 + 1;
            }
        });
        assert_eq!(v, [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]);
    }
}
