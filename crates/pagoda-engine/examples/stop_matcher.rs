//! Cost of stop-string matching per generated token: 16 stop strings, n = 8 choices sharing one
//! compiled set, text fed in token-sized deltas as the detokenizer produces them. For
//! comparison, the per-string scan the matcher replaced runs on the same input.
//!
//! `cargo run --release -p pagoda-engine --example stop_matcher`

use pagoda_engine::{StopStringMatcher, StopStringSet};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

const CHOICES: usize = 8;
const TOKENS_PER_CHOICE: usize = 20_000;

/// Stop strings of the kinds clients send: chat-template ends, role headers, separators.
fn typical_stops() -> Vec<String> {
    [
        "</s>",
        "<|im_end|>",
        "<|endoftext|>",
        "<|eot_id|>",
        "\n\nUser:",
        "\n\nHuman:",
        "\nAssistant:",
        "###",
        "\n---\n",
        "END OF ANSWER",
        "[DONE]",
        "Observation:",
        "```\n\n",
        "<!-- stop -->",
        "\n\n\n",
        "Q:",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Stop strings that make the held-back tail as long as the server allows (256 bytes each) on
/// text that keeps almost matching them.
fn adversarial_stops() -> Vec<String> {
    (0..16)
        .map(|i| "a".repeat(240 + i) + &"!".repeat(16 - i))
        .collect()
}

/// Token-sized deltas (about 4 bytes) of English-like text, or of `a`s for the adversarial case.
fn deltas(adversarial: bool) -> Vec<String> {
    let text = if adversarial {
        "a".repeat(4 * TOKENS_PER_CHOICE)
    } else {
        "The old pagoda stood at the top of the hill, and every morning the monks climbed its \
         steps to ring the bell. Travellers came from far away to hear it; some stayed for a \
         season, some for a lifetime. Q. What did they find? A: quiet, mostly.\n"
            .repeat(TOKENS_PER_CHOICE / 40 + 1)
    };
    let mut out = Vec::with_capacity(TOKENS_PER_CHOICE);
    let mut rest = text.as_str();
    while out.len() < TOKENS_PER_CHOICE && !rest.is_empty() {
        let mut cut = rest.len().min(4);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        out.push(rest[..cut].to_string());
        rest = &rest[cut..];
    }
    out
}

/// The matcher before the automaton: each stop string searched in the held text at every
/// delta, then every suffix checked against every stop string.
struct PerStringScan {
    stops: Vec<String>,
    held: String,
}

impl PerStringScan {
    fn push(&mut self, delta: &str) -> (String, bool) {
        self.held.push_str(delta);
        let hit = self
            .stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| self.held.find(s.as_str()).map(|pos| (pos, i)))
            .min();
        if let Some((pos, _)) = hit {
            let text = self.held[..pos].to_string();
            self.held.clear();
            return (text, true);
        }
        let keep = self
            .held
            .char_indices()
            .map(|(i, _)| i)
            .find(|&i| {
                let tail = &self.held[i..];
                self.stops
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
            })
            .unwrap_or(self.held.len());
        (self.held.drain(..keep).collect(), false)
    }
}

/// Nanoseconds per token (per choice) for the automaton and for the per-string scan.
fn measure(stops: &[String], deltas: &[String]) -> (f64, f64, f64) {
    let tokens = (CHOICES * deltas.len()) as f64;

    let start = Instant::now();
    // Built once per request, as the engine does.
    let set = Arc::new(StopStringSet::new(stops));
    let build = start.elapsed();
    let mut matchers: Vec<StopStringMatcher> = (0..CHOICES)
        .map(|_| StopStringMatcher::with_set(set.clone()))
        .collect();
    let start = Instant::now();
    for delta in deltas {
        for m in &mut matchers {
            let out = m.push(black_box(delta));
            assert!(out.stopped.is_none());
            black_box(out.text);
        }
    }
    let automaton = start.elapsed().as_nanos() as f64 / tokens;

    let mut scans: Vec<PerStringScan> = (0..CHOICES)
        .map(|_| PerStringScan {
            stops: stops.to_vec(),
            held: String::new(),
        })
        .collect();
    let start = Instant::now();
    for delta in deltas {
        for s in &mut scans {
            let (text, stopped) = s.push(black_box(delta));
            assert!(!stopped);
            black_box(text);
        }
    }
    let scan = start.elapsed().as_nanos() as f64 / tokens;
    (automaton, scan, build.as_nanos() as f64 / 1000.0)
}

fn main() {
    println!(
        "stop-string matching, {} stop strings, n = {CHOICES}, {TOKENS_PER_CHOICE} tokens per choice",
        typical_stops().len()
    );
    for (name, stops, adversarial) in [
        ("typical stops, prose", typical_stops(), false),
        (
            "16 x 256-byte near-miss stops, 'aaaa' text",
            adversarial_stops(),
            true,
        ),
    ] {
        let deltas = deltas(adversarial);
        // One warm-up run, then the measured one.
        measure(&stops, &deltas);
        let (automaton, scan, build_us) = measure(&stops, &deltas);
        println!(
            "{name:<45} automaton {automaton:>8.1} ns/token   per-string scan {scan:>9.1} ns/token   (set built in {build_us:.1} us)"
        );
    }
}
