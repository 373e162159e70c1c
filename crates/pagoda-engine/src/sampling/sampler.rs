//! The sampler: one request's logits row in, its next token (and logprobs) out.
//!
//! Order: logit bias, min-tokens masking, penalties, then greedy argmax, or temperature, top-k,
//! top-p, min-p and a draw from the request's own RNG.
//!
//! Logprobs (the chosen token's and the top-N alternatives) are those of the raw model output,
//! `log_softmax` of the row before any processing, as vLLM reports them by default: they describe
//! the model, not the sampling settings, and stay comparable across requests.

use super::params::SamplingParams;
use super::processors::{apply_logit_bias, apply_penalties, mask_stop_tokens_before_min};
use super::rng::SamplerRng;
use crate::ids::TokenId;
use std::cmp::Ordering;

/// One request's view for sampling a token.
pub struct SampleInput<'a> {
    pub params: &'a SamplingParams,
    pub prompt: &'a [TokenId],
    pub output: &'a [TokenId],
    /// The model's EOS tokens (from its generation config).
    pub eos_token_ids: &'a [TokenId],
    pub rng: &'a mut SamplerRng,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SampledToken {
    pub token: TokenId,
    /// Raw-model logprob of `token`.
    pub logprob: f32,
    /// The `params.logprobs` most likely tokens under the raw model, most likely first (ties:
    /// lower id first); empty when not asked for.
    pub top_logprobs: Vec<(TokenId, f32)>,
}

/// Holds scratch buffers reused across calls; one per engine loop is enough.
#[derive(Debug, Default)]
pub struct Sampler {
    raw: Vec<f32>,
    scratch: Vec<TokenId>,
    candidates: Vec<(TokenId, f32)>,
}

/// Larger logit first; equal logits by lower token id, so results never depend on sort order.
fn by_logit_desc(a: &(TokenId, f32), b: &(TokenId, f32)) -> Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

fn log_sum_exp(row: &[f32]) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        return max;
    }
    let sum: f64 = row.iter().map(|&x| f64::from(x - max).exp()).sum();
    max + sum.ln() as f32
}

/// Index of the largest finite-or-infinite logit, ties to the lower id; NaN never wins.
fn argmax(row: &[f32]) -> Option<TokenId> {
    let mut best: Option<(TokenId, f32)> = None;
    for (i, &x) in row.iter().enumerate() {
        if x.is_nan() || x == f32::NEG_INFINITY {
            continue;
        }
        if best.is_none_or(|(_, b)| x > b) {
            best = Some((i as TokenId, x));
        }
    }
    best.map(|(i, _)| i)
}

fn top_n(row: &[f32], n: usize, lse: f32) -> Vec<(TokenId, f32)> {
    let mut top: Vec<(TokenId, f32)> = Vec::with_capacity(n + 1);
    if n == 0 {
        return top;
    }
    for (i, &x) in row.iter().enumerate() {
        if x.is_nan() {
            continue;
        }
        let item = (i as TokenId, x);
        if top.len() == n && by_logit_desc(&item, &top[n - 1]) != Ordering::Less {
            continue;
        }
        let at = top.partition_point(|t| by_logit_desc(t, &item) == Ordering::Less);
        top.insert(at, item);
        top.truncate(n);
    }
    top.into_iter().map(|(t, x)| (t, x - lse)).collect()
}

impl Sampler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Samples the next token from `logits` (one row, vocabulary-sized), which it overwrites
    /// with the processed logits.
    pub fn sample(&mut self, logits: &mut [f32], input: SampleInput<'_>) -> SampledToken {
        let params = input.params;
        self.raw.clear();
        self.raw.extend_from_slice(logits);
        let lse = log_sum_exp(&self.raw);
        let top_logprobs = top_n(&self.raw, params.logprobs.unwrap_or(0), lse);

        apply_logit_bias(logits, params);
        mask_stop_tokens_before_min(logits, params, input.output.len(), input.eos_token_ids);
        apply_penalties(
            logits,
            params,
            input.prompt,
            input.output,
            &mut self.scratch,
        );

        let processed_best = argmax(logits);
        let token = match processed_best {
            // Everything masked (e.g. a bias of -100 on a tiny vocabulary): fall back to the model.
            None => argmax(&self.raw).unwrap_or(0),
            Some(best) if params.is_greedy() => best,
            Some(_) => self.draw(logits, params, input.rng),
        };
        SampledToken {
            token,
            logprob: self.raw[token as usize] - lse,
            top_logprobs,
        }
    }

    /// Temperature, then top-k / top-p / min-p filtering, then one draw.
    fn draw(
        &mut self,
        logits: &mut [f32],
        params: &SamplingParams,
        rng: &mut SamplerRng,
    ) -> TokenId {
        let inv_t = 1.0 / params.temperature;
        for x in logits.iter_mut() {
            *x *= inv_t;
        }
        let u = rng.next_f64();
        let filtering = params.top_k.is_some() || params.top_p < 1.0 || params.min_p > 0.0;
        if !filtering {
            // No ordering needed: invert the CDF in token-id order.
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let weights = logits.iter().map(|&x| weight(x, max));
            return pick(weights.enumerate().map(|(i, w)| (i as TokenId, w)), u);
        }

        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, x)| !x.is_nan() && **x != f32::NEG_INFINITY)
                .map(|(i, &x)| (i as TokenId, x)),
        );
        let candidates = &mut self.candidates;
        if let Some(k) = params.top_k.filter(|&k| k < candidates.len()) {
            candidates.select_nth_unstable_by(k - 1, by_logit_desc);
            candidates.truncate(k);
        }
        candidates.sort_unstable_by(by_logit_desc);
        let max = candidates[0].1;
        let total: f64 = candidates.iter().map(|c| weight(c.1, max)).sum();
        let mut keep = candidates.len();
        if params.top_p < 1.0 {
            let target = f64::from(params.top_p) * total;
            let mut cum = 0.0;
            keep = candidates
                .iter()
                .position(|c| {
                    cum += weight(c.1, max);
                    cum >= target
                })
                .map_or(keep, |i| i + 1);
        }
        if params.min_p > 0.0 {
            // The most likely token has weight 1, so a probability ratio is just a weight.
            let floor = f64::from(params.min_p);
            keep = keep.min(
                candidates
                    .iter()
                    .take_while(|c| weight(c.1, max) >= floor)
                    .count(),
            );
        }
        candidates.truncate(keep.max(1));
        pick(candidates.iter().map(|&(t, x)| (t, weight(x, max))), u)
    }
}

/// Unnormalised probability of a logit relative to the maximum.
fn weight(x: f32, max: f32) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        f64::from(x - max).exp()
    }
}

/// The token where the cumulative weight passes `u` times the total.
fn pick(weights: impl Iterator<Item = (TokenId, f64)> + Clone, u: f64) -> TokenId {
    let total: f64 = weights.clone().map(|(_, w)| w).sum();
    let target = u * total;
    let mut cum = 0.0;
    let mut last = None;
    for (token, w) in weights {
        if w <= 0.0 {
            continue;
        }
        cum += w;
        last = Some(token);
        if cum > target {
            return token;
        }
    }
    last.unwrap_or(0)
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
