//! Incremental parser for server-sent events as OpenAI-compatible servers send them.
//!
//! Network reads split events at arbitrary byte positions, so the parser keeps the
//! unfinished tail between calls and only hands out complete `data:` payloads.

/// One complete event payload, or the end-of-stream marker.
#[derive(Debug, PartialEq, Eq)]
pub enum SseEvent {
    Data(String),
    Done,
}

#[derive(Debug, Default)]
pub struct SseParser {
    pending: Vec<u8>,
    data: String,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes as they arrived and appends every event they complete to `out`.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.pending.extend_from_slice(bytes);
        let mut consumed = 0;
        while let Some(newline) = self.pending[consumed..].iter().position(|&b| b == b'\n') {
            let line_end = consumed + newline;
            let mut line = &self.pending[consumed..line_end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            handle_line(&mut self.data, line, out);
            consumed = line_end + 1;
        }
        self.pending.drain(..consumed);
    }

    /// Flushes an event left open when the connection closed without a blank line.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            handle_line(&mut self.data, &line, out);
        }
        dispatch(&mut self.data, out);
    }
}

/// Applies one line to the event being assembled in `data`.
fn handle_line(data: &mut String, line: &[u8], out: &mut Vec<SseEvent>) {
    if line.is_empty() {
        dispatch(data, out);
        return;
    }
    // Comments (": keep-alive") and fields other than data carry nothing we measure.
    if let Some(value) = line.strip_prefix(b"data:") {
        let value = value.strip_prefix(b" ").unwrap_or(value);
        if !data.is_empty() {
            data.push('\n');
        }
        data.push_str(&String::from_utf8_lossy(value));
    }
}

fn dispatch(data: &mut String, out: &mut Vec<SseEvent>) {
    if data.is_empty() {
        return;
    }
    let payload = std::mem::take(data);
    if payload.trim() == "[DONE]" {
        out.push(SseEvent::Done);
    } else {
        out.push(SseEvent::Data(payload));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(pieces: &[&str]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for piece in pieces {
            parser.feed(piece.as_bytes(), &mut out);
        }
        parser.finish(&mut out);
        out
    }

    #[test]
    fn events_split_across_reads_are_reassembled() {
        let events = parse_in_pieces(&["da", "ta: {\"a\"", ":1}\n", "\ndata: [DONE]\n\n"]);
        assert_eq!(
            events,
            vec![SseEvent::Data("{\"a\":1}".into()), SseEvent::Done]
        );
    }

    #[test]
    fn several_events_in_one_read_are_all_returned() {
        let events = parse_in_pieces(&["data: 1\n\ndata: 2\r\n\r\n: ping\n\ndata:3\n\n"]);
        assert_eq!(
            events,
            vec![
                SseEvent::Data("1".into()),
                SseEvent::Data("2".into()),
                SseEvent::Data("3".into())
            ]
        );
    }

    #[test]
    fn unterminated_last_event_is_flushed_at_finish() {
        let events = parse_in_pieces(&["data: tail"]);
        assert_eq!(events, vec![SseEvent::Data("tail".into())]);
    }
}
