//! Stop strings on the text side.
//!
//! The detokenizer feeds text deltas in; out comes the text that is safe to send now. Any tail
//! that could still grow into a stop string is held back until the next delta settles it, and a
//! stop string itself is never returned.
//!
//! All of a request's stop strings are matched at once by one Aho-Corasick automaton
//! (`StopStringSet`), built once per request and shared by its choices; each choice keeps only
//! its automaton state and the held-back tail. A delta costs one transition per byte whatever
//! the number of stop strings, and the held-back tail is shorter than the longest stop string.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::nfa::contiguous::NFA;
use aho_corasick::{Anchored, MatchKind};
use std::collections::HashMap;
use std::sync::Arc;

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

/// One request's stop strings, compiled. Immutable; share it between choices with an `Arc`.
#[derive(Clone, Debug)]
pub struct StopStringSet {
    /// `None` when there is nothing to match.
    automaton: Option<NFA>,
    /// Pattern id -> index in the request's `stop` list (empty strings are left out).
    stop_index: Vec<usize>,
    /// Depth of every automaton state: the length of the stop-string prefix it stands for.
    /// The state after some text stands for the longest suffix of that text that is a prefix
    /// of a stop string, which is exactly the tail to hold back.
    depth: HashMap<StateID, usize>,
    max_len: usize,
}

impl StopStringSet {
    /// Compiles `stops`; empty strings never match.
    pub fn new(stops: &[String]) -> Self {
        let (stop_index, patterns): (Vec<usize>, Vec<&str>) = stops
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .map(|(i, s)| (i, s.as_str()))
            .unzip();
        let empty = Self {
            automaton: None,
            stop_index: Vec::new(),
            depth: HashMap::new(),
            max_len: 0,
        };
        if patterns.is_empty() {
            return empty;
        }
        // Standard semantics keep the whole trie and report every pattern that ends at a
        // position; the earliest-start rule is applied here, over those reports.
        let Ok(automaton) = NFA::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
        else {
            // Only too many states could fail, which the server's caps rule out; matching
            // nothing is the safe way to degrade.
            return empty;
        };
        let mut depth = HashMap::new();
        let Ok(start) = automaton.start_state(Anchored::No) else {
            return empty;
        };
        depth.insert(start, 0);
        for pattern in &patterns {
            // Along a pattern's own bytes every transition is a trie edge, so this walk visits
            // each state of that pattern's path at its true depth.
            let mut state = start;
            for (i, &byte) in pattern.as_bytes().iter().enumerate() {
                state = automaton.next_state(Anchored::No, state, byte);
                depth.insert(state, i + 1);
            }
        }
        let max_len = patterns.iter().map(|p| p.len()).max().unwrap_or(0);
        Self {
            automaton: Some(automaton),
            stop_index,
            depth,
            max_len,
        }
    }

    /// Length in bytes of the longest stop string: the held-back tail is always shorter.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }
}

#[derive(Clone, Debug)]
pub struct StopStringMatcher {
    set: Arc<StopStringSet>,
    /// The automaton's state after all the text pushed so far.
    state: Option<StateID>,
    /// Text received but not yet emitted.
    held: String,
    /// Bytes of generated text before `held`.
    consumed: usize,
    stopped: Option<StopHit>,
}

impl StopStringMatcher {
    /// A matcher with its own compiled set (one choice; several choices should share one set
    /// through `with_set`).
    pub fn new(stops: Vec<String>) -> Self {
        Self::with_set(Arc::new(StopStringSet::new(&stops)))
    }

    /// A matcher over a set shared with the request's other choices.
    pub fn with_set(set: Arc<StopStringSet>) -> Self {
        let state = set
            .automaton
            .as_ref()
            .and_then(|a| a.start_state(Anchored::No).ok());
        Self {
            set,
            state,
            held: String::new(),
            consumed: 0,
            stopped: None,
        }
    }

    pub fn stopped(&self) -> Option<&StopHit> {
        self.stopped.as_ref()
    }

    /// Bytes held back right now (always less than the longest stop string).
    pub fn held_len(&self) -> usize {
        self.held.len()
    }

    /// Takes the next text delta.
    pub fn push(&mut self, delta: &str) -> StopStringOutput {
        if self.stopped.is_some() {
            return StopStringOutput::default();
        }
        let (Some(automaton), Some(mut state)) = (self.set.automaton.as_ref(), self.state) else {
            return StopStringOutput {
                text: delta.to_string(),
                stopped: None,
            };
        };
        // Earliest match start (in `held`), then the stop listed first.
        let mut best: Option<(usize, usize)> = None;
        let base = self.held.len();
        for (i, &byte) in delta.as_bytes().iter().enumerate() {
            state = automaton.next_state(Anchored::No, state, byte);
            if !automaton.is_match(state) {
                continue;
            }
            let end = base + i + 1;
            for m in 0..automaton.match_len(state) {
                let pattern = automaton.match_pattern(state, m);
                let len = automaton.pattern_len(pattern);
                let (Some(start), Some(&index)) = (
                    end.checked_sub(len),
                    self.set.stop_index.get(pattern.as_usize()),
                ) else {
                    continue;
                };
                if best.is_none_or(|b| (start, index) < b) {
                    best = Some((start, index));
                }
            }
        }
        self.state = Some(state);
        self.held.push_str(delta);
        if let Some((pos, stop_index)) = best {
            let pos = floor_char_boundary(&self.held, pos);
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
        let partial = self.set.depth.get(&state).copied().unwrap_or(0);
        let keep_from = floor_char_boundary(&self.held, self.held.len().saturating_sub(partial));
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
        self.state = self
            .set
            .automaton
            .as_ref()
            .and_then(|a| a.start_state(Anchored::No).ok());
        text
    }
}

/// The largest char boundary at or below `at` (matches and held tails start on one already,
/// since stop strings are whole UTF-8 strings; this only guards the slicing).
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
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

    #[test]
    fn a_longer_stop_listed_first_wins_a_tie_at_the_same_start() {
        let mut m = matcher(&["abc", "ab"]);
        let out = m.push("xabcd");
        assert_eq!(out.text, "x");
        assert_eq!(out.stopped.unwrap().stop_index, 0);
        let mut m = matcher(&["ab", "abc"]);
        assert_eq!(m.push("xabcd").stopped.unwrap().stop_index, 0);
    }

    #[test]
    fn a_match_that_starts_earlier_wins_even_if_it_ends_later() {
        let mut m = matcher(&["bc", "abcd"]);
        let out = m.push("zabcd");
        assert_eq!(out.text, "z");
        assert_eq!(
            out.stopped,
            Some(StopHit {
                stop_index: 1,
                offset: 1
            })
        );
    }

    #[test]
    fn empty_stop_strings_never_match_and_keep_their_index() {
        let mut m = StopStringMatcher::new(vec![String::new(), "end".into()]);
        assert_eq!(m.push("the e").text, "the ");
        let out = m.push("nd");
        assert_eq!(out.stopped.unwrap().stop_index, 1);
        let mut none = StopStringMatcher::new(vec![String::new()]);
        assert_eq!(none.push("anything").text, "anything");
    }

    #[test]
    fn choices_sharing_a_set_keep_their_own_state() {
        let set = Arc::new(StopStringSet::new(&["STOP".to_string()]));
        let mut a = StopStringMatcher::with_set(set.clone());
        let mut b = StopStringMatcher::with_set(set);
        assert_eq!(a.push("ST").text, "");
        assert_eq!(b.push("go on").text, "go on");
        assert!(a.push("OP").stopped.is_some());
        assert_eq!(b.push(" STO").text, " ");
        assert_eq!(b.push("RM").text, "STORM");
    }

    #[test]
    fn the_held_tail_is_shorter_than_the_longest_stop_string() {
        let stops: Vec<String> = (1..=16).map(|n| "a".repeat(n * 4 - 1) + "!").collect();
        let set = Arc::new(StopStringSet::new(&stops));
        assert_eq!(set.max_len(), 64);
        let mut m = StopStringMatcher::with_set(set);
        let mut emitted = String::new();
        let mut pushed = 0;
        for round in 0..200 {
            let delta = if round % 50 == 20 { "b" } else { "aaa" };
            pushed += delta.len();
            let out = m.push(delta);
            assert!(out.stopped.is_none());
            assert!(m.held_len() < 64, "held {}", m.held_len());
            emitted.push_str(&out.text);
        }
        assert_eq!(
            m.held_len(),
            63,
            "a run of a's is a prefix of the longest stop"
        );
        emitted.push_str(&m.flush());
        assert_eq!(emitted.len(), pushed);
    }

    /// The matcher as it was before the automaton: every stop string searched in the held
    /// text at every delta. The automaton must agree with it on any input.
    fn reference(stops: &[String], deltas: &[String]) -> (String, Option<StopHit>) {
        let stops: Vec<(usize, &String)> = stops
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .collect();
        let (mut held, mut consumed, mut out) = (String::new(), 0, String::new());
        for delta in deltas {
            held.push_str(delta);
            let hit = stops
                .iter()
                .filter_map(|(i, s)| held.find(s.as_str()).map(|pos| (pos, *i)))
                .min();
            if let Some((pos, stop_index)) = hit {
                out.push_str(&held[..pos]);
                let offset = consumed + pos;
                return (out, Some(StopHit { stop_index, offset }));
            }
            let keep = held
                .char_indices()
                .map(|(i, _)| i)
                .find(|&i| {
                    let tail = &held[i..];
                    stops
                        .iter()
                        .any(|(_, s)| s.len() > tail.len() && s.starts_with(tail))
                })
                .unwrap_or(held.len());
            out.extend(held.drain(..keep));
            consumed += keep;
        }
        out.push_str(&held);
        (out, None)
    }

    proptest::proptest! {
        #[test]
        fn the_automaton_agrees_with_per_string_scans(
            stops in proptest::collection::vec("[abé]{0,4}", 1..5),
            deltas in proptest::collection::vec("[abéc]{0,3}", 0..12),
        ) {
            let mut m = StopStringMatcher::new(stops.clone());
            let mut out = String::new();
            let mut hit = None;
            for delta in &deltas {
                let o = m.push(delta);
                out.push_str(&o.text);
                if o.stopped.is_some() {
                    hit = o.stopped;
                    break;
                }
            }
            if hit.is_none() {
                out.push_str(&m.flush());
            }
            proptest::prop_assert_eq!((out, hit), reference(&stops, &deltas));
        }
    }
}
