//! Prompts from a ShareGPT-format JSON file given by path (never downloaded).
//!
//! The file is a list of `{"conversations": [{"from": "human", "value": ...},
//! {"from": "gpt", "value": ...}, ...]}`. Each entry's first human message is the prompt;
//! the length of the reply that followed it sets `max_tokens`.

use super::{approximate_tokens, Conversation, Message, Role, Workload};
use crate::error::BenchError;
use crate::token_count::TokenCounter;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    conversations: Vec<Utterance>,
}

#[derive(Deserialize)]
struct Utterance {
    from: String,
    value: String,
}

struct Sample {
    prompt: String,
    output_tokens: u32,
}

pub struct ShareGptWorkload {
    samples: Vec<Sample>,
    next: usize,
}

impl ShareGptWorkload {
    /// Loads and shuffles (with `seed`) the usable prompt/reply pairs of `path`.
    /// Replies are measured with `tokenizer` when given, otherwise by word count.
    pub fn load(
        path: &Path,
        tokenizer: Option<&TokenCounter>,
        seed: u64,
    ) -> Result<Self, BenchError> {
        let text = std::fs::read_to_string(path).map_err(|source| BenchError::ReadFile {
            path: path.to_owned(),
            source,
        })?;
        let entries: Vec<Entry> =
            serde_json::from_str(&text).map_err(|source| BenchError::ParseJson {
                path: path.to_owned(),
                source,
            })?;
        let mut samples: Vec<Sample> = entries
            .iter()
            .filter_map(|entry| first_exchange(&entry.conversations))
            .map(|(prompt, reply)| Sample {
                prompt: prompt.to_owned(),
                output_tokens: match tokenizer {
                    Some(t) => t.count(reply) as u32,
                    None => approximate_tokens(reply),
                }
                .max(1),
            })
            .collect();
        if samples.is_empty() {
            return Err(BenchError::InvalidArgument(format!(
                "{} holds no human message followed by a gpt reply",
                path.display()
            )));
        }
        samples.shuffle(&mut StdRng::seed_from_u64(seed));
        Ok(Self { samples, next: 0 })
    }
}

fn first_exchange(utterances: &[Utterance]) -> Option<(&str, &str)> {
    utterances.windows(2).find_map(|pair| {
        let is_human = matches!(pair[0].from.as_str(), "human" | "user");
        let is_reply = matches!(pair[1].from.as_str(), "gpt" | "assistant" | "chatgpt");
        (is_human && is_reply && !pair[0].value.trim().is_empty())
            .then(|| (pair[0].value.as_str(), pair[1].value.as_str()))
    })
}

impl Workload for ShareGptWorkload {
    fn next_conversation(&mut self) -> Conversation {
        // Wrap around so duration-bounded runs never run dry.
        let sample = &self.samples[self.next % self.samples.len()];
        self.next += 1;
        Conversation::single(
            vec![Message::new(Role::User, sample.prompt.clone())],
            sample.output_tokens,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn loads_first_exchange_and_skips_unusable_entries() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        write!(
            file,
            r#"[
              {{"id": "a", "conversations": [
                {{"from": "human", "value": "what is two plus two"}},
                {{"from": "gpt", "value": "it is four"}}]}},
              {{"id": "b", "conversations": [{{"from": "gpt", "value": "alone"}}]}}
            ]"#
        )
        .unwrap();
        let mut workload = ShareGptWorkload::load(file.path(), None, 0).unwrap();
        let conversation = workload.next_conversation();
        assert_eq!(
            conversation.turns[0].new_messages[0].content,
            "what is two plus two"
        );
        assert_eq!(conversation.turns[0].max_tokens, 3);
        assert_eq!(workload.next_conversation(), conversation);
    }
}
