//! Group commit: one writer thread takes every event queued since its last write, writes
//! them in one go, then acknowledges each. Under load a single commit covers many requests,
//! so the cost per request falls as the rate rises.

use std::sync::mpsc::{self, Receiver, Sender};
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

pub struct Batcher {
    tx: Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl Batcher {
    /// Starts the writer thread; `write` persists one batch.
    pub fn start<W>(name: &str, mut write: W) -> Batcher
    where
        W: FnMut(&[CostEvent]) -> Result<(), String> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel::<Message>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || run(rx, &mut write))
            .expect("spawning the metering writer");
        Batcher {
            tx,
            thread: Some(thread),
        }
    }

    pub fn send(&self, message: Message) {
        if self.tx.send(message).is_err() {
            tracing::error!("the metering writer has stopped; an event is lost");
        }
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

fn run(rx: Receiver<Message>, write: &mut dyn FnMut(&[CostEvent]) -> Result<(), String>) {
    let mut events = Vec::new();
    let mut acks = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                Message::Event(event, ack) => {
                    events.push(*event);
                    acks.extend(ack);
                }
                Message::Flush(ack) => acks.push(ack),
            }
            next = if events.len() < MAX_BATCH {
                rx.try_recv().ok()
            } else {
                None
            };
        }
        let mut delay = Duration::from_millis(10);
        let mut attempts = 0;
        loop {
            match write(&events) {
                Ok(()) => {
                    for ack in acks.drain(..) {
                        let _ = ack.send(());
                    }
                    break;
                }
                Err(e) if attempts < 5 => {
                    tracing::warn!(error = %e, events = events.len(), "metering write failed; retrying");
                    std::thread::sleep(delay);
                    delay *= 2;
                    attempts += 1;
                }
                Err(e) => {
                    tracing::error!(error = %e, events = events.len(), "metering write failed; events lost");
                    acks.clear();
                    break;
                }
            }
        }
        events.clear();
    }
}
