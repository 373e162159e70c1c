//! The channel from the engine to one request's stream, with two counts both ends share:
//! tokens the engine generated per choice (what the request is billed for, whether or not the
//! caller read them) and outputs sent but not yet taken (how far the caller lags; the engine
//! aborts a request whose caller stopped reading, so the queue stays bounded).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::request::RequestOutput;

#[derive(Debug)]
struct Progress {
    generated: Box<[AtomicU64]>,
    unread: AtomicUsize,
}

/// The engine's end.
#[derive(Debug, Clone)]
pub(crate) struct OutputSender {
    sender: UnboundedSender<RequestOutput>,
    progress: Arc<Progress>,
}

/// The stream's end.
#[derive(Debug)]
pub(crate) struct OutputReceiver {
    receiver: UnboundedReceiver<RequestOutput>,
    progress: Arc<Progress>,
}

/// A channel for a request of `n` choices.
pub(crate) fn output_channel(n: usize) -> (OutputSender, OutputReceiver) {
    let (sender, receiver) = unbounded_channel();
    let progress = Arc::new(Progress {
        generated: (0..n.max(1)).map(|_| AtomicU64::new(0)).collect(),
        unread: AtomicUsize::new(0),
    });
    (
        OutputSender {
            sender,
            progress: progress.clone(),
        },
        OutputReceiver { receiver, progress },
    )
}

impl OutputSender {
    /// Counts the output's tokens as generated, then sends it (to nobody, if the stream is
    /// gone: the count still stands).
    pub fn send(&self, output: RequestOutput) {
        if let Some(count) = self.progress.generated.get(output.index) {
            count.fetch_add(output.token_ids.len() as u64, Ordering::Relaxed);
        }
        self.progress.unread.fetch_add(1, Ordering::Relaxed);
        if self.sender.send(output).is_err() {
            self.progress.unread.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Outputs sent and not yet taken by the stream.
    pub fn unread(&self) -> usize {
        self.progress.unread.load(Ordering::Relaxed)
    }
}

impl OutputReceiver {
    pub async fn recv(&mut self) -> Option<RequestOutput> {
        let out = self.receiver.recv().await;
        self.taken(out)
    }

    pub fn blocking_recv(&mut self) -> Option<RequestOutput> {
        let out = self.receiver.blocking_recv();
        self.taken(out)
    }

    fn taken(&self, out: Option<RequestOutput>) -> Option<RequestOutput> {
        if out.is_some() {
            self.progress.unread.fetch_sub(1, Ordering::Relaxed);
        }
        out
    }

    /// Tokens generated so far for each choice.
    pub fn generated(&self) -> Vec<u64> {
        self.progress
            .generated
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(index: usize, n: usize) -> RequestOutput {
        RequestOutput {
            index,
            token_ids: vec![7; n],
            text: String::new(),
            logprobs: Vec::new(),
            cached_tokens: None,
            finished: None,
        }
    }

    #[test]
    fn counts_what_was_generated_and_what_is_unread() {
        let (tx, mut rx) = output_channel(2);
        tx.send(tokens(0, 1));
        tx.send(tokens(1, 2));
        tx.send(tokens(1, 1));
        assert_eq!(tx.unread(), 3);
        rx.blocking_recv().unwrap();
        assert_eq!(tx.unread(), 2);
        drop(rx.blocking_recv());
        assert_eq!(rx.generated(), vec![1, 3]);
        let generated = rx.generated();
        drop(rx);
        tx.send(tokens(0, 1));
        assert_eq!(generated, vec![1, 3]);
        assert_eq!(tx.unread(), 1, "the unsent output is not counted as unread");
    }
}
