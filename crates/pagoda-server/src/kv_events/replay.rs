//! The last published batches, kept for subscribers that missed some (a late start, a
//! reconnect): a DEALER sends `["", start_seq]` and gets every kept batch from `start_seq` on,
//! each as `["", seq, payload]`, then `["", -1, ""]`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use zeromq::{RouterSocket, SocketRecv, SocketSend, ZmqMessage};

/// Batches kept for replay, and their payload bytes at most (whichever is reached first).
pub const REPLAY_BATCHES: usize = 10_000;
pub const REPLAY_BYTES: usize = 64 << 20;

/// Marks the end of a replay.
const END_SEQ: i64 = -1;

#[derive(Debug, Default)]
pub struct ReplayBuffer {
    batches: VecDeque<(u64, Bytes)>,
    bytes: usize,
}

impl ReplayBuffer {
    pub fn push(&mut self, seq: u64, payload: Bytes) {
        self.bytes += payload.len();
        self.batches.push_back((seq, payload));
        while self.batches.len() > REPLAY_BATCHES || self.bytes > REPLAY_BYTES {
            let Some((_, old)) = self.batches.pop_front() else {
                break;
            };
            self.bytes -= old.len();
        }
    }

    /// Kept batches with a sequence number of at least `start`, oldest first.
    pub fn since(&self, start: u64) -> Vec<(u64, Bytes)> {
        self.batches
            .iter()
            .filter(|(seq, _)| *seq >= start)
            .cloned()
            .collect()
    }
}

/// Answers replay requests until the socket fails.
pub async fn serve(mut socket: RouterSocket, buffer: Arc<Mutex<ReplayBuffer>>) {
    loop {
        let request = match socket.recv().await {
            Ok(request) => request.into_vec(),
            Err(error) => {
                tracing::warn!(%error, "KV-event replay socket failed; replays stop");
                return;
            }
        };
        // [peer identity, empty delimiter, start seq (8 bytes, big-endian)]
        let start = match request.as_slice() {
            [_, delimiter, seq] if delimiter.is_empty() => <[u8; 8]>::try_from(seq.as_ref()),
            _ => {
                tracing::warn!(frames = request.len(), "malformed KV-event replay request");
                continue;
            }
        };
        let Ok(start) = start else {
            tracing::warn!("KV-event replay request without an 8-byte sequence number");
            continue;
        };
        let peer = request[0].clone();
        let batches = buffer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .since(u64::from_be_bytes(start));
        let replies = batches
            .into_iter()
            .map(|(seq, payload)| (Bytes::copy_from_slice(&seq.to_be_bytes()), payload))
            .chain([(Bytes::copy_from_slice(&END_SEQ.to_be_bytes()), Bytes::new())]);
        for (seq, payload) in replies {
            let reply = frames([peer.clone(), Bytes::new(), seq, payload]);
            if let Err(error) = socket.send(reply).await {
                tracing::warn!(%error, "KV-event replay reply not sent");
                break;
            }
        }
    }
}

pub fn frames(parts: impl IntoIterator<Item = Bytes>) -> ZmqMessage {
    let parts: Vec<Bytes> = parts.into_iter().collect();
    ZmqMessage::try_from(parts).expect("at least one frame")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_keeps_the_newest_batches_within_both_caps() {
        let mut buffer = ReplayBuffer::default();
        for seq in 0..(REPLAY_BATCHES as u64 + 5) {
            buffer.push(seq, Bytes::from_static(b"xy"));
        }
        let kept = buffer.since(0);
        assert_eq!(kept.len(), REPLAY_BATCHES);
        assert_eq!(kept[0].0, 5);
        assert_eq!(buffer.since(REPLAY_BATCHES as u64 + 3).len(), 2);
        buffer.push(99_999, Bytes::from(vec![0u8; REPLAY_BYTES]));
        assert_eq!(
            buffer.since(0).len(),
            1,
            "the byte cap evicts everything older"
        );
    }
}
