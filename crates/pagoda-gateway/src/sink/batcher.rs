//! Group commit: one writer thread takes every event queued since its last write, writes
//! them in one go, then acknowledges each. Under load a single commit covers many requests,
//! so the cost per request falls as the rate rises.
//!
//! A write that fails is retried with backoff and its events are kept, never dropped: after
//! `FAILING_AFTER` failures the sink reports itself failing (the gateway then refuses new
//! admissions, or serves on with `--metering-on-failure serve`) and the waiting responses are
//! let go, their events still queued here until the store takes them. Only a process that
//! exits while the store still fails loses events, and it says how many.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::event::CostEvent;

/// Told when the event is durable (`Ok`) or could not be written (dropped sender).
pub type Ack = oneshot::Sender<()>;

pub enum Message {
    Event(Box<CostEvent>, Option<Ack>),
    /// Acknowledged once everything sent before it is written.
    Flush(Ack),
}

const MAX_BATCH: usize = 4096;
/// Consecutive failed writes after which the sink counts as failing.
const FAILING_AFTER: u32 = 5;
const FIRST_DELAY: Duration = Duration::from_millis(10);
const MAX_DELAY: Duration = Duration::from_secs(5);
/// Attempts left at exit before the queued events are given up (loudly).
const ATTEMPTS_AT_EXIT: u32 = 3;

/// What the writer thread tells the rest of the gateway.
#[derive(Debug, Default)]
pub struct SinkHealth {
    failing: AtomicBool,
    queued: AtomicUsize,
}

impl SinkHealth {
    /// The store has refused the last `FAILING_AFTER` writes or more.
    pub fn is_failing(&self) -> bool {
        self.failing.load(Ordering::Acquire)
    }

    /// Events waiting for the store.
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }
}

pub struct Batcher {
    tx: Sender<Message>,
    thread: Option<JoinHandle<()>>,
    health: Arc<SinkHealth>,
}

impl Batcher {
    /// Starts the writer thread; `write` persists one batch.
    pub fn start<W>(name: &str, mut write: W) -> Batcher
    where
        W: FnMut(&[CostEvent]) -> Result<(), String> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Message>();
        let health = Arc::new(SinkHealth::default());
        let shared = health.clone();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || Writer::new(rx, &shared).run(&mut write))
            .expect("spawning the metering writer");
        Batcher {
            tx,
            thread: Some(thread),
            health,
        }
    }

    pub fn send(&self, message: Message) {
        if self.tx.send(message).is_err() {
            tracing::error!("the metering writer has stopped; an event is lost");
        }
    }

    pub fn health(&self) -> &SinkHealth {
        &self.health
    }
}

impl Drop for Batcher {
    /// Writes what is queued before the process goes on to exit.
    fn drop(&mut self) {
        let (tx, _rx) = mpsc::channel();
        drop(std::mem::replace(&mut self.tx, tx));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Writer<'a> {
    rx: Receiver<Message>,
    health: &'a SinkHealth,
    events: Vec<CostEvent>,
    acks: Vec<Ack>,
    closed: bool,
}

impl<'a> Writer<'a> {
    fn new(rx: Receiver<Message>, health: &'a SinkHealth) -> Writer<'a> {
        Writer {
            rx,
            health,
            events: Vec::new(),
            acks: Vec::new(),
            closed: false,
        }
    }

    fn take(&mut self, message: Message) {
        match message {
            Message::Event(event, ack) => {
                self.events.push(*event);
                self.acks.extend(ack);
            }
            Message::Flush(ack) => self.acks.push(ack),
        }
        self.health
            .queued
            .store(self.events.len(), Ordering::Relaxed);
    }

    /// Takes what is queued without waiting, up to a batch.
    fn drain(&mut self) {
        while self.events.len() < MAX_BATCH {
            match self.rx.try_recv() {
                Ok(m) => self.take(m),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.closed = true;
                    break;
                }
            }
        }
    }

    fn run(mut self, write: &mut dyn FnMut(&[CostEvent]) -> Result<(), String>) {
        let mut delay = FIRST_DELAY;
        let mut failures = 0u32;
        let mut attempts_left_at_exit = ATTEMPTS_AT_EXIT;
        loop {
            if self.events.is_empty() && self.acks.is_empty() {
                match self.rx.recv() {
                    Ok(m) => self.take(m),
                    Err(_) => return,
                }
            }
            self.drain();
            let result = if self.events.is_empty() {
                Ok(())
            } else {
                write(&self.events)
            };
            match result {
                Ok(()) => {
                    if failures >= FAILING_AFTER {
                        tracing::info!(events = self.events.len(), "the metering store recovered");
                    }
                    // Healthy before the acks go: whoever sees an ack sees the sink healthy.
                    self.events.clear();
                    self.health.queued.store(0, Ordering::Relaxed);
                    self.health.failing.store(false, Ordering::Release);
                    for ack in self.acks.drain(..) {
                        let _ = ack.send(());
                    }
                    failures = 0;
                    delay = FIRST_DELAY;
                    if self.closed {
                        return;
                    }
                }
                Err(e) => {
                    failures += 1;
                    if failures < FAILING_AFTER {
                        tracing::warn!(error = %e, events = self.events.len(), "metering write failed; retrying");
                    } else {
                        if failures == FAILING_AFTER {
                            tracing::error!(error = %e, events = self.events.len(), "the metering store keeps failing; events stay queued and are retried");
                        }
                        self.health.failing.store(true, Ordering::Release);
                        // Responses waiting for durability go out; their events stay here.
                        self.acks.clear();
                    }
                    if self.closed {
                        attempts_left_at_exit = attempts_left_at_exit.saturating_sub(1);
                        if attempts_left_at_exit == 0 {
                            tracing::error!(error = %e, events = self.events.len(), "exiting with the metering store still failing: these cost events are lost");
                            return;
                        }
                    }
                    // Waiting on the channel rather than sleeping keeps taking new events.
                    match self.rx.recv_timeout(delay) {
                        Ok(m) => self.take(m),
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => self.closed = true,
                    }
                    delay = (delay * 2).min(MAX_DELAY);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::event::test_event as event;

    #[test]
    fn a_failing_store_keeps_every_event_and_says_so_until_it_recovers() {
        let down = Arc::new(AtomicBool::new(true));
        let written = Arc::new(Mutex::new(Vec::new()));
        let (d, w) = (down.clone(), written.clone());
        let batcher = Batcher::start("test-writer", move |events| {
            if d.load(Ordering::SeqCst) {
                return Err("store down".into());
            }
            w.lock()
                .unwrap()
                .extend(events.iter().map(|e| e.prompt_tokens));
            Ok(())
        });
        let (tx, rx) = oneshot::channel();
        batcher.send(Message::Event(Box::new(event(1)), Some(tx)));
        // The waiting response is let go once the sink counts as failing.
        assert!(
            rx.blocking_recv().is_err(),
            "acknowledged as durable while down"
        );
        assert!(batcher.health().is_failing());
        for i in 2..=4 {
            batcher.send(Message::Event(Box::new(event(i)), None));
        }
        down.store(false, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        batcher.send(Message::Flush(tx));
        rx.blocking_recv().unwrap();
        assert!(!batcher.health().is_failing());
        let mut got = written.lock().unwrap().clone();
        got.sort();
        assert_eq!(got, vec![1, 2, 3, 4], "an event was lost or written twice");
    }
}
