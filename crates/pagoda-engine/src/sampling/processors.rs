//! Logit processors applied in place to one request's row, in the order the sampler calls them.

use super::params::SamplingParams;
use crate::ids::TokenId;

fn set(logits: &mut [f32], token: TokenId, f: impl FnOnce(f32) -> f32) {
    if let Some(x) = logits.get_mut(token as usize) {
        *x = f(*x);
    }
}

/// Adds the request's logit bias. Tokens outside the row are ignored (validated earlier).
pub(super) fn apply_logit_bias(logits: &mut [f32], params: &SamplingParams) {
    for (&token, &bias) in &params.logit_bias {
        set(logits, token, |x| x + bias);
    }
}

/// Masks EOS (unless ignored) and stop tokens while fewer than `min_tokens` are out.
pub(super) fn mask_stop_tokens_before_min(
    logits: &mut [f32],
    params: &SamplingParams,
    num_output: usize,
    eos_token_ids: &[TokenId],
) {
    if num_output >= params.min_tokens {
        return;
    }
    let eos = eos_token_ids.iter().filter(|_| !params.ignore_eos);
    for &token in params.stop_token_ids.iter().chain(eos) {
        set(logits, token, |_| f32::NEG_INFINITY);
    }
}

/// Repetition penalty over prompt and output; presence and frequency penalties over the output
/// only. `scratch` is reused between calls to avoid allocating per token.
pub(super) fn apply_penalties(
    logits: &mut [f32],
    params: &SamplingParams,
    prompt: &[TokenId],
    output: &[TokenId],
    scratch: &mut Vec<TokenId>,
) {
    if params.repetition_penalty != 1.0 {
        scratch.clear();
        scratch.extend_from_slice(prompt);
        scratch.extend_from_slice(output);
        scratch.sort_unstable();
        scratch.dedup();
        let p = params.repetition_penalty;
        for &token in scratch.iter() {
            set(logits, token, |x| if x > 0.0 { x / p } else { x * p });
        }
    }
    if params.presence_penalty != 0.0 || params.frequency_penalty != 0.0 {
        scratch.clear();
        scratch.extend_from_slice(output);
        scratch.sort_unstable();
        for run in scratch.chunk_by(|a, b| a == b) {
            let Some(&token) = run.first() else {
                continue;
            };
            let count = run.len() as f32;
            let penalty = params.presence_penalty + params.frequency_penalty * count;
            set(logits, token, |x| x - penalty);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn logit_bias_is_added_and_out_of_range_tokens_are_ignored() {
        let mut logits = [0.0, 1.0, 2.0];
        let params = SamplingParams {
            logit_bias: BTreeMap::from([(1, 5.0), (7, 1.0)]),
            ..SamplingParams::default()
        };
        apply_logit_bias(&mut logits, &params);
        assert_eq!(logits, [0.0, 6.0, 2.0]);
    }

    #[test]
    fn stop_tokens_are_masked_until_min_tokens() {
        let params = SamplingParams {
            min_tokens: 2,
            stop_token_ids: vec![1],
            ..SamplingParams::default()
        };
        let mut logits = [0.0; 4];
        mask_stop_tokens_before_min(&mut logits, &params, 1, &[3]);
        assert_eq!(logits, [0.0, f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]);
        let mut logits = [0.0; 4];
        mask_stop_tokens_before_min(&mut logits, &params, 2, &[3]);
        assert_eq!(logits, [0.0; 4]);
        let ignore = SamplingParams {
            ignore_eos: true,
            ..params
        };
        let mut logits = [0.0; 4];
        mask_stop_tokens_before_min(&mut logits, &ignore, 0, &[3]);
        assert_eq!(logits, [0.0, f32::NEG_INFINITY, 0.0, 0.0]);
    }

    #[test]
    fn repetition_penalty_shrinks_seen_logits_towards_less_likely() {
        let params = SamplingParams {
            repetition_penalty: 2.0,
            ..SamplingParams::default()
        };
        let mut logits = [4.0, -4.0, 4.0];
        apply_penalties(&mut logits, &params, &[0, 0], &[1], &mut Vec::new());
        assert_eq!(logits, [2.0, -8.0, 4.0]);
    }

    #[test]
    fn presence_and_frequency_penalties_count_output_tokens_only() {
        let params = SamplingParams {
            presence_penalty: 0.5,
            frequency_penalty: 0.25,
            ..SamplingParams::default()
        };
        let mut logits = [1.0, 1.0, 1.0];
        apply_penalties(&mut logits, &params, &[0], &[2, 1, 2], &mut Vec::new());
        assert_eq!(logits, [1.0, 0.25, 0.0]);
    }
}
