use super::*;
use std::collections::BTreeMap;

const EOS: TokenId = 3;

fn sample_with(
    params: &SamplingParams,
    logits: &[f32],
    output: &[TokenId],
    seed: u64,
) -> SampledToken {
    let mut row = logits.to_vec();
    let mut rng = SamplerRng::from_seed(seed);
    Sampler::new().sample(
        &mut row,
        SampleInput {
            params,
            prompt: &[0],
            output,
            eos_token_ids: &[EOS],
            rng: &mut rng,
            allowed: None,
        },
    )
}

fn greedy() -> SamplingParams {
    SamplingParams::greedy(16)
}

fn random(temperature: f32) -> SamplingParams {
    SamplingParams {
        temperature,
        ..SamplingParams::default()
    }
}

fn close(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-5
}

#[test]
fn greedy_takes_the_argmax_with_ties_to_the_lower_id() {
    assert_eq!(
        sample_with(&greedy(), &[0.1, 2.0, -1.0, 0.5], &[], 0).token,
        1
    );
    assert_eq!(
        sample_with(&greedy(), &[1.0, 2.0, 2.0, 0.0], &[], 0).token,
        1
    );
}

#[test]
fn logprobs_are_those_of_the_raw_model_output() {
    // log_softmax([ln 1, ln 2, ln 1]) = [ln 1/4, ln 1/2, ln 1/4].
    let logits = [0.0, 2f32.ln(), 0.0];
    let params = SamplingParams {
        logprobs: Some(2),
        logit_bias: BTreeMap::from([(0, 10.0)]),
        ..greedy()
    };
    let out = sample_with(&params, &logits, &[], 0);
    assert_eq!(out.token, 0, "the bias decides the token");
    assert!(
        close(out.logprob, 0.25f32.ln()),
        "but not the reported logprob"
    );
    assert_eq!(out.top_logprobs.len(), 2);
    assert_eq!(out.top_logprobs[0].0, 1);
    assert!(close(out.top_logprobs[0].1, 0.5f32.ln()));
    assert_eq!(out.top_logprobs[1].0, 0, "ties go to the lower id");
    assert!(close(out.top_logprobs[1].1, 0.25f32.ln()));
}

#[test]
fn no_top_logprobs_unless_asked() {
    assert!(sample_with(&greedy(), &[0.0, 1.0], &[], 0)
        .top_logprobs
        .is_empty());
}

#[test]
fn the_same_seed_draws_the_same_tokens() {
    let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
    let draws = |seed| -> Vec<TokenId> {
        let mut rng = SamplerRng::from_seed(seed);
        let mut sampler = Sampler::new();
        let params = random(1.0);
        (0..20)
            .map(|_| {
                let mut row = logits.clone();
                let input = SampleInput {
                    params: &params,
                    prompt: &[],
                    output: &[],
                    eos_token_ids: &[],
                    rng: &mut rng,
                    allowed: None,
                };
                sampler.sample(&mut row, input).token
            })
            .collect()
    };
    assert_eq!(draws(42), draws(42));
    assert_ne!(draws(42), draws(43));
}

#[test]
fn a_draw_inverts_the_cdf_with_the_requests_own_uniform() {
    // Probabilities 1/4 and 3/4: token 0 exactly when the first uniform is below 1/4.
    let logits = [0.0, 3f32.ln()];
    for seed in 0..20 {
        let u = SamplerRng::from_seed(seed).next_f64();
        let expected = if u < 0.25 { 0 } else { 1 };
        assert_eq!(
            sample_with(&random(1.0), &logits, &[], seed).token,
            expected,
            "seed {seed}"
        );
    }
}

#[test]
fn sampled_frequencies_follow_the_distribution() {
    let logits = [0.0, 3f32.ln()];
    let ones = (0..4000)
        .filter(|&seed| sample_with(&random(1.0), &logits, &[], seed).token == 1)
        .count();
    let share = ones as f64 / 4000.0;
    assert!((share - 0.75).abs() < 0.03, "share of token 1: {share}");
}

#[test]
fn top_k_of_one_is_greedy_whatever_the_seed() {
    let params = SamplingParams {
        top_k: Some(1),
        ..random(1.0)
    };
    for seed in 0..20 {
        assert_eq!(sample_with(&params, &[0.0, 0.5, 0.4], &[], seed).token, 1);
    }
}

#[test]
fn top_k_keeps_only_the_k_most_likely() {
    let params = SamplingParams {
        top_k: Some(2),
        ..random(5.0)
    };
    for seed in 0..50 {
        let token = sample_with(&params, &[0.0, 1.0, 0.9, 0.1], &[], seed).token;
        assert!(token == 1 || token == 2, "seed {seed} drew {token}");
    }
}

#[test]
fn top_p_keeps_the_smallest_set_reaching_p() {
    // Probabilities 0.5, 0.3, 0.2: top_p 0.7 keeps tokens 0 and 1.
    let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
    let params = SamplingParams {
        top_p: 0.7,
        ..random(1.0)
    };
    let drawn: Vec<TokenId> = (0..100)
        .map(|s| sample_with(&params, &logits, &[], s).token)
        .collect();
    assert!(drawn.contains(&0) && drawn.contains(&1));
    assert!(!drawn.contains(&2));
}

#[test]
fn min_p_drops_tokens_far_below_the_best() {
    // Token 2 has 0.2 / 0.5 = 0.4 of the best probability; min_p 0.5 drops it.
    let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
    let params = SamplingParams {
        min_p: 0.5,
        ..random(1.0)
    };
    let drawn: Vec<TokenId> = (0..100)
        .map(|s| sample_with(&params, &logits, &[], s).token)
        .collect();
    assert!(drawn.contains(&0) && drawn.contains(&1));
    assert!(!drawn.contains(&2));
}

#[test]
fn a_tiny_temperature_behaves_like_greedy() {
    for seed in 0..20 {
        assert_eq!(
            sample_with(&random(1e-3), &[1.0, 1.5, 1.4], &[], seed).token,
            1
        );
    }
}

#[test]
fn eos_is_masked_before_min_tokens() {
    let params = SamplingParams {
        min_tokens: 2,
        ..greedy()
    };
    let logits = [0.0, 1.0, 0.0, 9.0];
    assert_eq!(sample_with(&params, &logits, &[1], 0).token, 1);
    assert_eq!(sample_with(&params, &logits, &[1, 1], 0).token, EOS);
}

#[test]
fn penalties_steer_greedy_away_from_repeats() {
    let params = SamplingParams {
        frequency_penalty: 1.0,
        ..greedy()
    };
    // Token 1 leads by 1.5 but appeared twice in the output.
    assert_eq!(sample_with(&params, &[0.0, 2.0, 0.5], &[1, 1], 0).token, 2);
}

#[test]
fn a_fully_masked_row_falls_back_to_the_raw_argmax() {
    let params = SamplingParams {
        logit_bias: BTreeMap::from([(0, f32::NEG_INFINITY), (1, f32::NEG_INFINITY)]),
        ..random(1.0)
    };
    assert_eq!(sample_with(&params, &[0.0, 1.0], &[], 0).token, 1);
}

#[test]
fn a_denormal_temperature_with_every_token_biased_down_is_greedy_and_does_not_panic() {
    // The request that used to stop the engine: 1/temperature is inf, so every logit became
    // -inf and top-k was left with no candidates.
    let params = SamplingParams {
        temperature: 1e-39,
        top_k: Some(5),
        logit_bias: (0..4).map(|t| (t, -100.0)).collect(),
        ..random(1.0)
    };
    assert_eq!(params.validate(), Ok(()));
    for seed in 0..5 {
        let out = sample_with(&params, &[0.1, 2.0, -1.0, 0.5], &[], seed);
        assert_eq!(out.token, 1);
        assert!(out.logprob.is_finite());
    }
}

#[test]
fn the_smallest_sampling_temperature_still_draws_without_overflow() {
    // Logits so large that scaling them before shifting would overflow to infinities.
    let params = SamplingParams {
        temperature: crate::sampling::MIN_SAMPLING_TEMPERATURE,
        top_k: Some(2),
        ..random(1.0)
    };
    for seed in 0..10 {
        let out = sample_with(&params, &[3e38, -3e38, 2.9e38, f32::MIN], &[], seed);
        assert_eq!(out.token, 0, "seed {seed}");
    }
}

#[test]
fn nan_logits_count_as_masked_and_logprobs_stay_numbers() {
    let logits = [f32::NAN, 1.0, f32::NAN, 0.0];
    for params in [greedy(), random(1.0)] {
        for seed in 0..10 {
            let out = sample_with(&params, &logits, &[], seed);
            assert!(out.token == 1 || out.token == 3, "drew {}", out.token);
            assert!(out.logprob.is_finite());
        }
    }
    let all_nan = sample_with(&random(1.0), &[f32::NAN; 3], &[], 0);
    assert_eq!(all_nan.token, 0);
    assert_eq!(all_nan.logprob, f32::NEG_INFINITY);
}

#[test]
fn infinite_logits_share_all_the_probability() {
    let logits = [0.0, f32::INFINITY, 5.0, f32::INFINITY];
    let params = SamplingParams {
        logprobs: Some(4),
        ..random(1.0)
    };
    let mut seen = Vec::new();
    for seed in 0..40 {
        let out = sample_with(&params, &logits, &[], seed);
        assert!(out.token == 1 || out.token == 3, "drew {}", out.token);
        assert!(close(out.logprob, 0.5f32.ln()));
        seen.push(out.token);
        let top: Vec<TokenId> = out.top_logprobs.iter().map(|t| t.0).collect();
        assert_eq!(top, [1, 3, 2, 0]);
        assert_eq!(out.top_logprobs[2].1, f32::NEG_INFINITY);
    }
    assert!(seen.contains(&1) && seen.contains(&3));
    assert_eq!(sample_with(&greedy(), &logits, &[], 0).token, 1);
}

#[test]
fn a_row_of_negative_infinities_falls_back_to_token_zero() {
    let out = sample_with(&random(1.0), &[f32::NEG_INFINITY; 4], &[], 0);
    assert_eq!(out.token, 0);
    assert_eq!(out.logprob, f32::NEG_INFINITY);
}

#[test]
fn more_top_logprobs_than_the_vocabulary_are_capped_at_its_size() {
    let params = SamplingParams {
        logprobs: Some(usize::MAX),
        ..greedy()
    };
    let out = sample_with(&params, &[0.0, 1.0], &[], 0);
    assert_eq!(out.top_logprobs.len(), 2);
}

#[test]
fn unvalidated_parameters_do_not_panic_either() {
    let params = SamplingParams {
        temperature: f32::INFINITY,
        top_k: Some(0),
        top_p: f32::NAN,
        min_p: f32::NAN,
        repetition_penalty: 0.0,
        presence_penalty: f32::NAN,
        logit_bias: BTreeMap::from([(0, f32::NEG_INFINITY), (1, f32::INFINITY)]),
        ..SamplingParams::default()
    };
    for seed in 0..10 {
        let out = sample_with(&params, &[1.0, 0.5, f32::INFINITY], &[0, 1], seed);
        assert!(out.token < 3);
        assert!(!out.logprob.is_nan());
    }
}

fn sample_allowed(params: &SamplingParams, logits: &[f32], words: &[u32], seed: u64) -> TokenId {
    let mut row = logits.to_vec();
    let mut rng = SamplerRng::from_seed(seed);
    let input = SampleInput {
        params,
        prompt: &[0],
        output: &[],
        eos_token_ids: &[EOS],
        rng: &mut rng,
        allowed: Some(AllowedTokens::new(words)),
    };
    Sampler::new().sample(&mut row, input).token
}

#[test]
fn a_constraint_limits_every_draw_and_the_all_masked_fallback() {
    // Tokens 1 and 2 allowed; token 0 is by far the model's favourite.
    let logits = [10.0, 0.0, 0.5, 1.0];
    for seed in 0..50 {
        let token = sample_allowed(&random(1.0), &logits, &[0b0110], seed);
        assert!(token == 1 || token == 2, "seed {seed} drew {token}");
    }
    assert_eq!(sample_allowed(&greedy(), &logits, &[0b0110], 0), 2);
    // A bias masking every allowed token: the fallback stays inside the constraint.
    let params = SamplingParams {
        logit_bias: BTreeMap::from([(1, f32::NEG_INFINITY), (2, f32::NEG_INFINITY)]),
        ..greedy()
    };
    assert_eq!(sample_allowed(&params, &logits, &[0b0110], 0), 2);
}

#[test]
fn a_draw_over_a_long_row_lands_where_the_exact_cdf_passes_u() {
    // Weights with zeros and a wide range, longer than many of `pick_in_order`'s blocks.
    let weights: Vec<f32> = (0..10_007u32)
        .map(|i| match i % 7 {
            0 => 0.0,
            k => (k as f32 * 0.37).exp() * if i % 1000 == 3 { 500.0 } else { 1.0 },
        })
        .collect();
    let total: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    for step in 0..1000 {
        let u = (f64::from(step) + 0.5) / 1000.0;
        let token = pick_in_order(&weights, u).unwrap() as usize;
        assert!(weights[token] > 0.0, "u {u}: picked a token of no weight");
        let before: f64 = weights[..token].iter().map(|&w| f64::from(w)).sum();
        let through = before + f64::from(weights[token]);
        let target = u * total;
        let slack = total * 1e-6;
        assert!(
            before <= target + slack && through > target - slack,
            "u {u}: token {token} covers [{before}, {through}), target {target}"
        );
    }
    assert_eq!(pick_in_order(&[0.0; 600], 0.5), None);
    assert_eq!(pick_in_order(&[0.0, 2.0, 0.0], 0.999_999), Some(1));
}

#[test]
fn greedy_on_a_long_row_takes_the_first_of_tied_maxima_past_nans() {
    let mut row: Vec<f32> = (0..70_001).map(|i| (i % 13) as f32).collect();
    row[5] = f32::NAN;
    row[40_000] = 99.0;
    row[60_000] = 99.0;
    row[1] = f32::INFINITY;
    assert_eq!(argmax(&row), Some(1));
    row[1] = 0.0;
    assert_eq!(argmax(&row), Some(40_000));
    assert_eq!(argmax(&[f32::NAN, f32::NEG_INFINITY]), None);
}
