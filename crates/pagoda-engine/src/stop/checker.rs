//! Token-level stop rules, checked after each sampled token.

use super::FinishReason;
use crate::ids::TokenId;
use crate::sampling::SamplingParams;

/// Decides, after a token is appended, whether the request is done.
#[derive(Clone, Debug)]
pub struct StopChecker {
    eos_token_ids: Vec<TokenId>,
    max_model_len: usize,
}

impl StopChecker {
    /// `eos_token_ids` come from the model's generation config; `max_model_len` is the context
    /// limit (prompt plus output).
    pub fn new(eos_token_ids: Vec<TokenId>, max_model_len: usize) -> Self {
        Self {
            eos_token_ids,
            max_model_len,
        }
    }

    pub fn eos_token_ids(&self) -> &[TokenId] {
        &self.eos_token_ids
    }

    pub fn max_model_len(&self) -> usize {
        self.max_model_len
    }

    /// The finish reason once `output` (ending with the newest token) is long enough or ends in
    /// a stop token. Before `min_tokens` only the length limits apply (the sampler masks stop
    /// tokens until then; this check holds even if it did not).
    pub fn check(
        &self,
        params: &SamplingParams,
        num_prompt_tokens: usize,
        output: &[TokenId],
    ) -> Option<FinishReason> {
        let last = *output.last()?;
        if output.len() >= params.min_tokens {
            let is_eos = !params.ignore_eos && self.eos_token_ids.contains(&last);
            if is_eos || params.stop_token_ids.contains(&last) {
                return Some(FinishReason::Stop);
            }
        }
        let at_max_tokens = params.max_tokens.is_some_and(|max| output.len() >= max);
        if at_max_tokens || num_prompt_tokens + output.len() >= self.max_model_len {
            return Some(FinishReason::Length);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EOS: TokenId = 2;

    fn checker() -> StopChecker {
        StopChecker::new(vec![EOS], 10)
    }

    fn params(max_tokens: Option<usize>) -> SamplingParams {
        SamplingParams {
            max_tokens,
            ..SamplingParams::default()
        }
    }

    #[test]
    fn eos_stops_the_request() {
        assert_eq!(
            checker().check(&params(None), 3, &[5, EOS]),
            Some(FinishReason::Stop)
        );
        assert_eq!(checker().check(&params(None), 3, &[EOS, 5]), None);
    }

    #[test]
    fn ignore_eos_keeps_going_but_stop_tokens_still_stop() {
        let p = SamplingParams {
            ignore_eos: true,
            stop_token_ids: vec![7],
            ..SamplingParams::default()
        };
        assert_eq!(checker().check(&p, 1, &[EOS]), None);
        assert_eq!(checker().check(&p, 1, &[7]), Some(FinishReason::Stop));
    }

    #[test]
    fn max_tokens_ends_with_length() {
        assert_eq!(checker().check(&params(Some(2)), 1, &[5]), None);
        assert_eq!(
            checker().check(&params(Some(2)), 1, &[5, 5]),
            Some(FinishReason::Length)
        );
    }

    #[test]
    fn a_stop_token_at_the_limit_reports_stop() {
        assert_eq!(
            checker().check(&params(Some(2)), 1, &[5, EOS]),
            Some(FinishReason::Stop)
        );
    }

    #[test]
    fn the_context_limit_ends_with_length() {
        assert_eq!(checker().check(&params(None), 8, &[5]), None);
        assert_eq!(
            checker().check(&params(None), 8, &[5, 5]),
            Some(FinishReason::Length)
        );
    }

    #[test]
    fn stop_tokens_before_min_tokens_do_not_stop() {
        let p = SamplingParams {
            min_tokens: 3,
            ..SamplingParams::default()
        };
        assert_eq!(checker().check(&p, 1, &[EOS]), None);
        assert_eq!(
            checker().check(&p, 1, &[5, 5, EOS]),
            Some(FinishReason::Stop)
        );
    }

    #[test]
    fn no_output_never_stops() {
        assert_eq!(checker().check(&params(Some(1)), 1, &[]), None);
    }
}
