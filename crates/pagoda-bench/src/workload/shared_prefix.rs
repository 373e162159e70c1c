//! Prompts that start with one of K shared system prompts, to measure prefix caching.

use super::{random_words, Conversation, LengthSpec, Message, Role, Workload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub struct SharedPrefixWorkload {
    rng: StdRng,
    system_prompts: Vec<String>,
    input_len: LengthSpec,
    output_len: LengthSpec,
    prefix_fraction: f64,
}

impl SharedPrefixWorkload {
    /// `prefix_fraction` of the mean input length is the shared system prompt; the rest of
    /// each prompt is unique. `num_prefixes` must be at least 1.
    pub fn new(
        input_len: LengthSpec,
        output_len: LengthSpec,
        prefix_fraction: f64,
        num_prefixes: u32,
        seed: u64,
    ) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let prefix_words = (input_len.mean() * prefix_fraction).round() as u32;
        let system_prompts = (0..num_prefixes.max(1))
            .map(|i| {
                format!(
                    "System prompt {i}: {}",
                    random_words(&mut rng, prefix_words)
                )
            })
            .collect();
        Self {
            rng,
            system_prompts,
            input_len,
            output_len,
            prefix_fraction,
        }
    }
}

impl Workload for SharedPrefixWorkload {
    fn next_conversation(&mut self) -> Conversation {
        let input = self.input_len.sample(&mut self.rng);
        let unique_words = (f64::from(input) * (1.0 - self.prefix_fraction)).round() as u32;
        let system = &self.system_prompts[self.rng.random_range(0..self.system_prompts.len())];
        let user = random_words(&mut self.rng, unique_words.max(1));
        let output = self.output_len.sample(&mut self.rng);
        Conversation::single(
            vec![
                Message::new(Role::System, system.clone()),
                Message::new(Role::User, user),
            ],
            output,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_prompt_starts_with_one_of_k_prefixes() {
        let mut workload =
            SharedPrefixWorkload::new(LengthSpec::fixed(100), LengthSpec::fixed(4), 0.5, 3, 9);
        let prefixes: HashSet<String> = (0..200)
            .map(|_| {
                workload.next_conversation().turns[0].new_messages[0]
                    .content
                    .clone()
            })
            .collect();
        assert_eq!(prefixes.len(), 3);
        assert!(prefixes.iter().all(|p| p.split(' ').count() == 3 + 50));
    }
}
