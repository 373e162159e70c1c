//! The sampler: one request's logits row in, its next token (and logprobs) out.
//!
//! Order: logit bias, min-tokens masking, penalties, the constraint's allowed tokens, then
//! greedy argmax, or temperature, top-k, top-p, min-p and a draw from the request's own RNG.
//!
//! Logprobs (the chosen token's and the top-N alternatives) are those of the raw model output,
//! `log_softmax` of the row before any processing, as vLLM reports them by default: they describe
//! the model, not the sampling settings, and stay comparable across requests.
//!
//! Nothing a request sends can make it panic: a NaN logit counts as masked, infinities are
//! handled explicitly, temperatures too small to divide by are greedy, and a row whose every
//! token is masked falls back to the unbiased argmax (among the allowed tokens, under a
//! constraint: a grammar is never broken to honour a bias or `min_tokens`).

use super::allowed::AllowedTokens;
use super::fast_exp::{exp_or_zero, exp_shifted, max_ignoring_nan, sum_exp_shifted};
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
    /// What a constraint allows next; `None` allows everything.
    pub allowed: Option<AllowedTokens<'a>>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SampledToken {
    pub token: TokenId,
    /// Raw-model logprob of `token`; never NaN (`-inf` for a token the model rules out).
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
    weights: Vec<f32>,
}

/// A logit that can never be picked.
fn is_masked(x: f32) -> bool {
    x.is_nan() || x == f32::NEG_INFINITY
}

/// Larger logit first; equal logits by lower token id, so results never depend on sort order.
fn by_logit_desc(a: &(TokenId, f32), b: &(TokenId, f32)) -> Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// `log_softmax` of a raw row, evaluated one token at a time. NaN logits count as `-inf`; if
/// some logits are `+inf`, they share all the probability.
struct LogSoftmax {
    max: f32,
    /// `max + ln(sum(exp(x - max)))` when `max` is finite.
    lse: f32,
    /// How many logits are `+inf` when `max` is.
    num_infinite: usize,
}

impl LogSoftmax {
    fn new(row: &[f32]) -> Self {
        let max = max_ignoring_nan(row);
        let mut dist = Self {
            max,
            lse: max,
            num_infinite: 0,
        };
        if max == f32::INFINITY {
            dist.num_infinite = row.iter().filter(|&&x| x == f32::INFINITY).count();
        } else if max.is_finite() {
            dist.lse = max + sum_exp_shifted(row, max).ln() as f32;
        }
        dist
    }

    fn logprob(&self, x: f32) -> f32 {
        if x.is_nan() || self.max == f32::NEG_INFINITY {
            f32::NEG_INFINITY
        } else if self.max == f32::INFINITY {
            if x == f32::INFINITY {
                -(self.num_infinite as f32).ln()
            } else {
                f32::NEG_INFINITY
            }
        } else {
            x - self.lse
        }
    }
}

/// The model's own best token among those allowed (the lowest allowed id if the model rules
/// them all out); `raw` is overwritten when a constraint applies.
fn fallback(raw: &mut [f32], allowed: Option<AllowedTokens<'_>>) -> TokenId {
    let Some(allowed) = allowed else {
        return argmax(raw).unwrap_or(0);
    };
    let first_allowed = (0..raw.len() as TokenId).find(|&t| allowed.allows(t));
    allowed.apply(raw);
    argmax(raw).or(first_allowed).unwrap_or(0)
}

/// Index of the largest unmasked logit, ties to the lower id.
fn argmax(row: &[f32]) -> Option<TokenId> {
    // Two vectorisable passes: the largest value, then where it first occurs.
    let best = max_ignoring_nan(row);
    if best == f32::NEG_INFINITY {
        return None;
    }
    row.iter().position(|&x| x == best).map(|i| i as TokenId)
}

/// The `n` most likely tokens of a raw row with their logprobs.
fn top_n(row: &[f32], n: usize, dist: &LogSoftmax) -> Vec<(TokenId, f32)> {
    let n = n.min(row.len());
    let mut top: Vec<(TokenId, f32)> = Vec::with_capacity(n + 1);
    if n == 0 {
        return top;
    }
    for (i, &x) in row.iter().enumerate() {
        if x.is_nan() {
            continue;
        }
        let item = (i as TokenId, x);
        let beaten = top.len() == n
            && top
                .last()
                .is_some_and(|last| by_logit_desc(&item, last) != Ordering::Less);
        if beaten {
            continue;
        }
        let at = top.partition_point(|t| by_logit_desc(t, &item) == Ordering::Less);
        top.insert(at, item);
        top.truncate(n);
    }
    top.into_iter().map(|(t, x)| (t, dist.logprob(x))).collect()
}

impl Sampler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Samples the next token from `logits` (one row, vocabulary-sized), which it overwrites
    /// with the processed logits. The token is inside the row whenever the row is not empty.
    pub fn sample(&mut self, logits: &mut [f32], input: SampleInput<'_>) -> SampledToken {
        let params = input.params;
        self.raw.clear();
        self.raw.extend_from_slice(logits);
        let dist = LogSoftmax::new(&self.raw);
        let top_logprobs = top_n(&self.raw, params.logprobs.unwrap_or(0), &dist);

        apply_logit_bias(logits, params);
        mask_stop_tokens_before_min(logits, params, input.output.len(), input.eos_token_ids);
        apply_penalties(
            logits,
            params,
            input.prompt,
            input.output,
            &mut self.scratch,
        );
        if let Some(allowed) = input.allowed {
            allowed.apply(logits);
        }

        let token = match argmax(logits) {
            // Everything masked (e.g. a bias of -100 on a tiny vocabulary, or a row of NaNs):
            // fall back to the model's own choice, deterministically.
            None => fallback(&mut self.raw, input.allowed),
            Some(best) if params.is_greedy() => best,
            Some(best) => self.draw(logits, params, input.rng).unwrap_or(best),
        };
        let raw = self.raw.get(token as usize).copied().unwrap_or(f32::NAN);
        SampledToken {
            token,
            logprob: dist.logprob(raw),
            top_logprobs,
        }
    }

    /// Temperature, then top-k / top-p / min-p filtering, then one draw. `None` only if no
    /// token has any weight left, which an unmasked row rules out.
    fn draw(
        &mut self,
        logits: &mut [f32],
        params: &SamplingParams,
        rng: &mut SamplerRng,
    ) -> Option<TokenId> {
        scale(logits, 1.0 / params.temperature);
        let u = rng.next_f64();
        let filtering = params.top_k.is_some() || params.top_p < 1.0 || params.min_p > 0.0;
        if !filtering {
            // No ordering needed: invert the CDF in token-id order. The weights are computed
            // once (`pick` walks them twice; an exp per vocabulary entry is most of a draw).
            exp_shifted(logits, 0.0, &mut self.weights);
            return pick_in_order(&self.weights, u);
        }

        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, x)| !is_masked(**x))
                .map(|(i, &x)| (i as TokenId, x)),
        );
        let candidates = &mut self.candidates;
        if let Some(k) = params.top_k.filter(|&k| k > 0 && k < candidates.len()) {
            candidates.select_nth_unstable_by(k - 1, by_logit_desc);
            candidates.truncate(k);
        }
        candidates.sort_unstable_by(by_logit_desc);
        let total: f64 = candidates.iter().map(|c| weight(c.1)).sum();
        let mut keep = candidates.len();
        if params.top_p < 1.0 {
            let target = f64::from(params.top_p) * total;
            let mut cum = 0.0;
            keep = candidates
                .iter()
                .position(|c| {
                    cum += weight(c.1);
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
                    .take_while(|c| weight(c.1) >= floor)
                    .count(),
            );
        }
        candidates.truncate(keep.max(1));
        pick(candidates.iter().map(|&(t, x)| (t, weight(x))), u)
    }
}

/// Shifts the row so that its best logit is 0, then divides by the temperature. Shifting first
/// keeps the best token at weight 1 however large the logits or small the temperature (scaling
/// first could overflow every logit to an infinity). After this every unmasked logit is in
/// `[-inf, 0]`.
fn scale(logits: &mut [f32], inv_temperature: f32) {
    let max = max_ignoring_nan(logits);
    for x in logits.iter_mut() {
        let v = *x;
        let scaled = if v == max {
            0.0
        } else {
            (v - max) * inv_temperature
        };
        // Only an infinite temperature (0 * inf) could give NaN here. Written without branches
        // so that the loop vectorises.
        let scaled = if scaled.is_nan() { 0.0 } else { scaled };
        *x = if is_masked(v) { v } else { scaled };
    }
}

/// Unnormalised probability of a scaled logit (the best one has weight 1; NaN none).
fn weight(x: f32) -> f64 {
    f64::from(exp_or_zero(x))
}

/// The token where the cumulative weight passes `u` times the total.
fn pick(weights: impl Iterator<Item = (TokenId, f64)> + Clone, u: f64) -> Option<TokenId> {
    let total: f64 = weights.clone().map(|(_, w)| w).sum();
    let target = u * total;
    let mut cum = 0.0;
    let mut last = None;
    for (token, w) in weights {
        if w.is_nan() || w <= 0.0 {
            continue;
        }
        cum += w;
        last = Some(token);
        if cum > target {
            return Some(token);
        }
    }
    last
}

/// `pick` over a whole row of weights in token-id order, a block at a time: the blocks' sums
/// (vectorised) skip the walk to the block where the cumulative weight passes `u` times the
/// total, and the walk goes on token by token from there.
fn pick_in_order(weights: &[f32], u: f64) -> Option<TokenId> {
    let total: f64 = weights.chunks(PICK_BLOCK).map(sum_weights).sum();
    let target = u * total;
    let mut cum = 0.0;
    let mut start = 0;
    for block in weights.chunks(PICK_BLOCK) {
        let sum = sum_weights(block);
        if cum + sum > target {
            break;
        }
        cum += sum;
        start += block.len();
    }
    for (i, &w) in weights.iter().enumerate().skip(start) {
        if w > 0.0 {
            cum += f64::from(w);
            if cum > target {
                return Some(i as TokenId);
            }
        }
    }
    // Rounding left the target just out of reach: the last token with any weight.
    weights.iter().rposition(|&w| w > 0.0).map(|i| i as TokenId)
}

/// Weights summed per `pick_in_order` block.
const PICK_BLOCK: usize = 256;

/// A block's weights summed in f32 lanes (weights are finite and >= 0), then in f64.
fn sum_weights(block: &[f32]) -> f64 {
    let mut lanes = [0.0f32; 16];
    let mut chunks = block.chunks_exact(16);
    for chunk in &mut chunks {
        for (acc, &w) in lanes.iter_mut().zip(chunk) {
            *acc += w;
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&w| f64::from(w)).sum();
    lanes.iter().map(|&l| f64::from(l)).sum::<f64>() + tail
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
