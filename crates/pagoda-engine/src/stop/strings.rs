//! Stop strings on the text side.
//!
//! The detokenizer feeds text deltas in; out comes the text that is safe to send now. Any tail
//! that could still grow into a stop string is held back until the next delta settles it, and a
//! stop string itself is never returned.

/// Where the output stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StopHit {
    /// Index of the matched string in the request's `stop` list.
    pub stop_index: usize,
    /// Byte offset of the match in the whole generated text (all deltas pushed so far).
    pub offset: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopStringOutput {
    /// Text to emit now.
    pub text: String,
    /// Set once a stop string matched; nothing is emitted after it.
    pub stopped: Option<StopHit>,
}

#[derive(Clone, Debug)]
pub struct StopStringMatcher {
    stops: Vec<String>,
    /// Text received but not yet emitted.
    held: String,
    /// Bytes of generated text before `held`.
    consumed: usize,
    stopped: Option<StopHit>,
}

impl StopStringMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops: stops.into_iter().filter(|s| !s.is_empty()).collect(),
            held: String::new(),
            consumed: 0,
            stopped: None,
        }
    }

    pub fn stopped(&self) -> Option<&StopHit> {
        self.stopped.as_ref()
    }

    /// Takes the next text delta.
    pub fn push(&mut self, delta: &str) -> StopStringOutput {
        if self.stopped.is_some() {
            return StopStringOutput::default();
        }
        self.held.push_str(delta);
        if let Some((pos, stop_index)) = self.earliest_match() {
            let text = self.held[..pos].to_string();
            let hit = StopHit {
                stop_index,
                offset: self.consumed + pos,
            };
            self.consumed += pos;
            self.held.clear();
            self.stopped = Some(hit.clone());
            return StopStringOutput {
                text,
                stopped: Some(hit),
            };
        }
        let keep_from = self.partial_match_start();
        let text: String = self.held.drain(..keep_from).collect();
        self.consumed += text.len();
        StopStringOutput {
            text,
            stopped: None,
        }
    }

    /// Releases the held-back text when generation ends without a stop string.
    pub fn flush(&mut self) -> String {
        let text = std::mem::take(&mut self.held);
        self.consumed += text.len();
        text
    }

    /// The earliest stop-string occurrence in `held`: (byte position, index in the list).
    /// Ties at one position go to the string listed first.
    fn earliest_match(&self) -> Option<(usize, usize)> {
        self.stops
            .iter()
            .enumerate()
            .filter_map(|(i, stop)| self.held.find(stop.as_str()).map(|pos| (pos, i)))
            .min()
    }

    /// Start of the longest suffix of `held` that is a proper prefix of some stop string.
    fn partial_match_start(&self) -> usize {
        self.held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &self.held[i..];
                self.stops
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
            })
            .unwrap_or(self.held.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(stops: &[&str]) -> StopStringMatcher {
        StopStringMatcher::new(stops.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn text_without_stop_strings_flows_through() {
        let mut m = matcher(&["###"]);
        assert_eq!(m.push("hello").text, "hello");
        assert_eq!(m.push(" world").text, " world");
        assert_eq!(m.flush(), "");
    }

    #[test]
    fn a_possible_stop_prefix_is_held_back_until_settled() {
        let mut m = matcher(&["###"]);
        assert_eq!(m.push("a #").text, "a ");
        assert_eq!(m.push("#").text, "");
        assert_eq!(m.push("b").text, "##b");
    }

    #[test]
    fn a_stop_string_split_across_deltas_stops_and_is_not_emitted() {
        let mut m = matcher(&["STOP"]);
        assert_eq!(m.push("done ST").text, "done ");
        let out = m.push("OP and more");
        assert_eq!(out.text, "");
        assert_eq!(
            out.stopped,
            Some(StopHit {
                stop_index: 0,
                offset: 5
            })
        );
        assert_eq!(m.push("ignored"), StopStringOutput::default());
    }

    #[test]
    fn the_earliest_of_several_stop_strings_wins() {
        let mut m = matcher(&["world", "lo"]);
        let out = m.push("hello world");
        assert_eq!(out.text, "hel");
        assert_eq!(
            out.stopped,
            Some(StopHit {
                stop_index: 1,
                offset: 3
            })
        );
    }

    #[test]
    fn flush_releases_a_held_tail_at_the_end() {
        let mut m = matcher(&["</s>"]);
        assert_eq!(m.push("x </").text, "x ");
        assert_eq!(m.flush(), "</");
    }

    #[test]
    fn multibyte_text_is_split_on_char_boundaries() {
        let mut m = matcher(&["é!"]);
        assert_eq!(m.push("caféé").text, "café");
        let out = m.push("!");
        assert_eq!(out.text, "");
        assert_eq!(
            out.stopped,
            Some(StopHit {
                stop_index: 0,
                offset: 5
            })
        );
    }
}
