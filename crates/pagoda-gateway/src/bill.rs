//! The bill of one request, as a pure function of what its choices did: no clock, no I/O, no
//! locks, so every case (completed, aborted before or after its first token, cached share,
//! engine counts beyond what was streamed, refused, failed) is tested exactly.

use std::time::Duration;

use rust_decimal::Decimal;

use crate::event::Status;
use crate::pricing::{ModelPrice, TokenUsage};

/// How one choice ended, as the engine reported it.
#[derive(Debug, Clone)]
pub struct Ended {
    pub prompt: u64,
    pub cached: u64,
    pub completion: u64,
    pub queued: Duration,
    pub first_token: Option<Duration>,
    pub compute: Duration,
    pub finish_reason: String,
    pub failed: bool,
}

/// What is known of one choice so far.
#[derive(Debug, Default, Clone)]
pub struct ChoiceTally {
    /// Tokens that reached the server.
    pub streamed: u64,
    /// Tokens the engine generated, read or not (known when the stream is dropped early).
    pub generated: u64,
    /// Prompt tokens the engine found cached, once it says (before the choice ends).
    pub cached: Option<u64>,
    pub end: Option<Ended>,
}

/// One prompt of the request: its length and where its choices start in the tallies.
#[derive(Debug, Clone, Copy)]
pub struct PromptShape {
    pub prompt_tokens: u64,
    pub first_choice: usize,
}

/// What the request is billed.
#[derive(Debug, Clone, PartialEq)]
pub struct Bill {
    pub status: Status,
    pub usage: TokenUsage,
    pub cost: Decimal,
    pub finish_reason: Option<String>,
    pub queued: Duration,
    /// The first choice's time to first token, from the engine if a choice ended.
    pub first_token: Option<Duration>,
    pub compute: Duration,
}

/// The bill: `submitted` says whether the request reached the engine (an early end after
/// that is an abort, before it a refusal, which is free); `first_streamed` is when the
/// server first saw a token, for aborted requests.
pub fn bill(
    prompts: &[PromptShape],
    choices: &[ChoiceTally],
    submitted: bool,
    first_streamed: Option<Duration>,
    price: &ModelPrice,
) -> Bill {
    let all_finished = choices.iter().all(|c| c.end.is_some());
    let failed = choices
        .iter()
        .any(|c| c.end.as_ref().is_some_and(|e| e.failed));
    let status = if failed {
        Status::Failed
    } else if all_finished {
        Status::Completed
    } else if submitted {
        Status::Aborted
    } else {
        Status::Rejected
    };
    let mut usage = TokenUsage::default();
    if status != Status::Rejected {
        for p in prompts {
            // Billed once per prompt (its choices share it): the engine's figures if its
            // first choice finished, else in full, cached as far as the engine said before
            // the abort (uncached if it never ran).
            let Some(first) = choices.get(p.first_choice) else {
                continue;
            };
            match &first.end {
                Some(end) => {
                    usage.prompt += end.prompt;
                    usage.cached += end.cached;
                }
                None => {
                    usage.prompt += p.prompt_tokens;
                    usage.cached += first.cached.unwrap_or(0).min(p.prompt_tokens);
                }
            }
        }
        for c in choices {
            let unfinished = c.streamed.max(c.generated);
            usage.completion += c.end.as_ref().map_or(unfinished, |e| e.completion);
        }
    }
    let ends = || choices.iter().filter_map(|c| c.end.as_ref());
    let finish_reason = match status {
        Status::Aborted => Some("abort".to_string()),
        Status::Rejected => None,
        _ => ends().next().map(|e| e.finish_reason.clone()),
    };
    Bill {
        status,
        usage,
        cost: if status == Status::Rejected {
            Decimal::ZERO
        } else {
            price.cost(usage)
        },
        finish_reason,
        queued: ends().map(|e| e.queued).max().unwrap_or_default(),
        first_token: ends()
            .filter_map(|e| e.first_token)
            .min()
            .or(first_streamed),
        compute: ends().map(|e| e.compute).sum(),
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn price() -> ModelPrice {
        ModelPrice {
            input: Decimal::from_str("0.50").unwrap(),
            cached_input: Some(Decimal::from_str("0.05").unwrap()),
            output: Decimal::from_str("1.50").unwrap(),
        }
    }

    fn ended(prompt: u64, cached: u64, completion: u64, reason: &str) -> Ended {
        Ended {
            prompt,
            cached,
            completion,
            queued: Duration::from_millis(3),
            first_token: Some(Duration::from_millis(20)),
            compute: Duration::from_millis(50),
            finish_reason: reason.into(),
            failed: false,
        }
    }

    fn one_prompt(tokens: u64) -> Vec<PromptShape> {
        vec![PromptShape {
            prompt_tokens: tokens,
            first_choice: 0,
        }]
    }

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn a_completed_request_is_billed_the_engines_figures_exactly() {
        let choices = [
            ChoiceTally {
                streamed: 7,
                end: Some(ended(100, 64, 7, "stop")),
                ..Default::default()
            },
            ChoiceTally {
                streamed: 3,
                end: Some(ended(100, 64, 3, "length")),
                ..Default::default()
            },
        ];
        let b = bill(&one_prompt(100), &choices, true, None, &price());
        assert_eq!(b.status, Status::Completed);
        // The prompt once for both choices: 36 fresh, 64 cached; 10 output tokens.
        assert_eq!(
            b.usage,
            TokenUsage {
                prompt: 100,
                cached: 64,
                completion: 10
            }
        );
        // (36 * 0.50 + 64 * 0.05 + 10 * 1.50) / 1e6 = (18 + 3.2 + 15) / 1e6.
        assert_eq!(b.cost, d("0.0000362"));
        assert_eq!(b.finish_reason.as_deref(), Some("stop"));
        assert_eq!(b.compute, Duration::from_millis(100));
    }

    #[test]
    fn an_abort_bills_the_full_prompt_with_its_cached_share_and_every_generated_token() {
        let choices = [ChoiceTally {
            streamed: 5,
            generated: 40,
            cached: Some(32),
            end: None,
        }];
        let b = bill(
            &one_prompt(48),
            &choices,
            true,
            Some(Duration::from_millis(9)),
            &price(),
        );
        assert_eq!(b.status, Status::Aborted);
        assert_eq!(
            b.usage,
            TokenUsage {
                prompt: 48,
                cached: 32,
                completion: 40
            }
        );
        assert_eq!(b.finish_reason.as_deref(), Some("abort"));
        assert_eq!(b.first_token, Some(Duration::from_millis(9)));
        // Aborted before the engine ran it at all: the prompt uncached, nothing generated.
        let never_ran = [ChoiceTally::default()];
        let b = bill(&one_prompt(48), &never_ran, true, None, &price());
        assert_eq!(
            b.usage,
            TokenUsage {
                prompt: 48,
                cached: 0,
                completion: 0
            }
        );
        assert_eq!(b.cost, d("0.000024"));
    }

    #[test]
    fn a_refused_request_is_free_and_a_failed_one_is_billed_what_it_used() {
        let b = bill(
            &one_prompt(10),
            &[ChoiceTally::default()],
            false,
            None,
            &price(),
        );
        assert_eq!(
            (b.status, b.cost, b.usage),
            (Status::Rejected, Decimal::ZERO, TokenUsage::default())
        );
        let mut end = ended(10, 0, 2, "abort");
        end.failed = true;
        let failed = [ChoiceTally {
            streamed: 2,
            end: Some(end),
            ..Default::default()
        }];
        let b = bill(&one_prompt(10), &failed, true, None, &price());
        assert_eq!(b.status, Status::Failed);
        assert_eq!(b.usage.completion, 2);
    }

    #[test]
    fn several_prompts_each_bill_their_own_prompt() {
        let prompts = [
            PromptShape {
                prompt_tokens: 10,
                first_choice: 0,
            },
            PromptShape {
                prompt_tokens: 20,
                first_choice: 2,
            },
        ];
        let choices: Vec<ChoiceTally> = [(10, 1), (10, 2), (20, 3), (20, 4)]
            .iter()
            .map(|&(p, c)| ChoiceTally {
                streamed: c,
                end: Some(ended(p, 0, c, "stop")),
                ..Default::default()
            })
            .collect();
        let b = bill(&prompts, &choices, true, None, &price());
        assert_eq!(
            b.usage,
            TokenUsage {
                prompt: 30,
                cached: 0,
                completion: 10
            }
        );
        // Exact decimals, no float rounding: (30 * 0.5 + 10 * 1.5) / 1e6.
        assert_eq!(b.cost, d("0.00003"));
    }
}
