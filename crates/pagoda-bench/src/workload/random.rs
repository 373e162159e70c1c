//! Independent prompts of random words, lengths fixed or drawn from ranges.

use super::{random_words, Conversation, LengthSpec, Message, Role, Workload};
use rand::rngs::StdRng;
use rand::SeedableRng;

pub struct RandomWorkload {
    rng: StdRng,
    input_len: LengthSpec,
    output_len: LengthSpec,
}

impl RandomWorkload {
    pub fn new(input_len: LengthSpec, output_len: LengthSpec, seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            input_len,
            output_len,
        }
    }
}

impl Workload for RandomWorkload {
    fn next_conversation(&mut self) -> Conversation {
        let input = self.input_len.sample(&mut self.rng);
        let output = self.output_len.sample(&mut self.rng);
        let prompt = random_words(&mut self.rng, input);
        Conversation::single(vec![Message::new(Role::User, prompt)], output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_have_the_requested_word_count() {
        let mut workload = RandomWorkload::new(LengthSpec::fixed(12), LengthSpec::fixed(5), 1);
        let conversation = workload.next_conversation();
        let turn = &conversation.turns[0];
        assert_eq!(turn.max_tokens, 5);
        assert_eq!(turn.new_messages[0].content.split(' ').count(), 12);
    }

    #[test]
    fn same_seed_gives_the_same_prompts() {
        let mut a = RandomWorkload::new(LengthSpec { min: 1, max: 50 }, LengthSpec::fixed(5), 3);
        let mut b = RandomWorkload::new(LengthSpec { min: 1, max: 50 }, LengthSpec::fixed(5), 3);
        for _ in 0..10 {
            assert_eq!(a.next_conversation(), b.next_conversation());
        }
    }
}
