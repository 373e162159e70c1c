//! Conversations of several turns; each turn resends the whole history.

use super::{random_words, Conversation, LengthSpec, Message, Role, Turn, Workload};
use rand::rngs::StdRng;
use rand::SeedableRng;

pub struct MultiTurnWorkload {
    rng: StdRng,
    turns: u32,
    input_len: LengthSpec,
    output_len: LengthSpec,
}

impl MultiTurnWorkload {
    /// `input_len` is the length of each new user message, not of the whole history.
    pub fn new(turns: u32, input_len: LengthSpec, output_len: LengthSpec, seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            turns: turns.max(1),
            input_len,
            output_len,
        }
    }
}

impl Workload for MultiTurnWorkload {
    fn next_conversation(&mut self) -> Conversation {
        let turns = (0..self.turns)
            .map(|_| {
                let words = self.input_len.sample(&mut self.rng);
                Turn {
                    new_messages: vec![Message::new(
                        Role::User,
                        random_words(&mut self.rng, words),
                    )],
                    max_tokens: self.output_len.sample(&mut self.rng),
                }
            })
            .collect();
        Conversation { turns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_has_the_requested_turns() {
        let mut workload = MultiTurnWorkload::new(4, LengthSpec::fixed(8), LengthSpec::fixed(3), 0);
        let conversation = workload.next_conversation();
        assert_eq!(conversation.turns.len(), 4);
        assert!(conversation.turns.iter().all(|t| t.new_messages.len() == 1));
    }
}
