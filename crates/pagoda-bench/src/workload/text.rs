//! Synthetic prompt text.
//!
//! Common short English words are a single token in the tokenizers of all mainstream
//! models, so `n` words make a prompt of about `n` tokens without needing the model's
//! tokenizer to build it.

use rand::Rng;

const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are",
    "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by",
    "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when",
    "up", "use", "your", "how", "said", "an", "each", "she", "which", "do", "their", "time", "if",
    "will", "way", "about", "many", "then", "them", "write", "would", "like", "so", "these", "her",
    "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go",
    "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know", "water",
    "than", "call", "first", "who", "may", "down", "side", "been", "now", "find",
];

/// `count` random words separated by spaces.
pub fn random_words(rng: &mut impl Rng, count: u32) -> String {
    let mut text = String::with_capacity(count as usize * 5);
    for i in 0..count {
        if i > 0 {
            text.push(' ');
        }
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text
}

/// Rough token count of arbitrary text when no tokenizer is available.
pub fn approximate_tokens(text: &str) -> u32 {
    text.split_whitespace().count() as u32
}
