//! Property test of the sampler against hostile rows and parameters: whatever the model emits
//! (finite, infinite or NaN logits) and whatever a request asks for within `validate()`, the
//! sampler returns a token inside the vocabulary with a logprob that is a number, and never
//! panics (a panic here would stop the engine thread for every tenant).

use pagoda_engine::{SampleInput, Sampler, SamplerRng, SamplingParams, TokenId};
use proptest::prelude::*;
use std::collections::BTreeMap;

const EOS: TokenId = 0;

/// Logits as a broken or adversarial model might produce them.
fn logit() -> impl Strategy<Value = f32> {
    prop_oneof![
        6 => -30.0f32..30.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
        1 => Just(f32::NEG_INFINITY),
        1 => Just(f32::MAX),
        1 => Just(f32::MIN),
        1 => Just(f32::MIN_POSITIVE),
        1 => any::<f32>(),
    ]
}

fn temperature() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        Just(1e-39f32),
        Just(9.99e-6f32),
        Just(1e-5f32),
        Just(f32::MAX),
        0.0f32..5.0,
    ]
}

fn unit() -> impl Strategy<Value = f32> {
    prop_oneof![Just(1.0f32), Just(f32::MIN_POSITIVE), 0.0f32..=1.0]
}

/// Parameters that pass `validate()`, for a vocabulary of `vocab` tokens.
fn params(vocab: usize) -> impl Strategy<Value = SamplingParams> {
    let tokens = 0..vocab as TokenId;
    let bias = prop_oneof![Just(-100.0f32), Just(100.0f32), -100.0f32..=100.0];
    (
        (
            temperature(),
            proptest::option::of(1usize..vocab + 4),
            unit().prop_filter("top_p > 0", |p| *p > 0.0),
            unit(),
            prop_oneof![Just(1.0f32), Just(1e-30f32), Just(1e30f32), 0.01f32..10.0],
            -2.0f32..=2.0,
            -2.0f32..=2.0,
        ),
        (
            prop::collection::btree_map(tokens.clone(), bias, 0..vocab + 1),
            proptest::option::of(0usize..=20),
            0usize..4,
            prop::collection::vec(tokens, 0..4),
            any::<bool>(),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (temperature, top_k, top_p, min_p, repetition_penalty, presence, frequency),
                (logit_bias, logprobs, min_tokens, stop_token_ids, ignore_eos, seed),
            )| SamplingParams {
                temperature,
                top_k,
                top_p,
                min_p,
                repetition_penalty,
                presence_penalty: presence,
                frequency_penalty: frequency,
                logit_bias,
                seed: Some(seed),
                logprobs,
                min_tokens,
                stop_token_ids,
                ignore_eos,
                ..SamplingParams::default()
            },
        )
        .prop_filter("must pass validate()", |p| p.validate().is_ok())
}

fn case() -> impl Strategy<Value = (Vec<f32>, SamplingParams, Vec<TokenId>, Vec<TokenId>)> {
    (1usize..40).prop_flat_map(|vocab| {
        let tokens = prop::collection::vec(0..vocab as TokenId, 0..8);
        (
            prop::collection::vec(logit(), vocab),
            params(vocab),
            tokens.clone(),
            tokens,
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_sampler_never_panics_and_stays_in_the_vocabulary(
        (logits, params, prompt, output) in case(),
    ) {
        let vocab = logits.len();
        let mut sampler = Sampler::new();
        let mut rng = SamplerRng::from_seed(params.seed.unwrap_or(0));
        // Several tokens in a row, reusing the sampler's scratch buffers as the engine does.
        for step in 0..3 {
            let mut row = logits.clone();
            let input = SampleInput {
                params: &params,
                prompt: &prompt,
                output: &output[..output.len().min(step * 3)],
                eos_token_ids: &[EOS],
                rng: &mut rng,
                allowed: None,
            };
            let out = sampler.sample(&mut row, input);
            prop_assert!((out.token as usize) < vocab, "token {} of {}", out.token, vocab);
            prop_assert!(!out.logprob.is_nan(), "NaN logprob for {:?}", logits);
            if logits.iter().any(|&x| !x.is_nan() && x != f32::NEG_INFINITY) {
                // A NaN logit is never chosen while the model gives any token a chance.
                prop_assert!(!logits[out.token as usize].is_nan());
            }
            let asked = params.logprobs.unwrap_or(0).min(vocab);
            prop_assert!(out.top_logprobs.len() <= asked);
            prop_assert!(out.top_logprobs.iter().all(|(t, lp)| (*t as usize) < vocab && !lp.is_nan()));
            prop_assert!(out.top_logprobs.windows(2).all(|w| w[0].1 >= w[1].1));
        }
    }

    #[test]
    fn greedy_picks_the_processed_argmax_of_a_finite_row(
        logits in prop::collection::vec(-30.0f32..30.0, 1..40),
        temperature in prop_oneof![Just(0.0f32), Just(1e-39f32), Just(9.99e-6f32)],
        bias_on_all in prop_oneof![Just(0.0f32), Just(-100.0f32)],
    ) {
        let params = SamplingParams {
            temperature,
            top_k: Some(5),
            logit_bias: (0..logits.len() as TokenId).map(|t| (t, bias_on_all)).collect::<BTreeMap<_, _>>(),
            ..SamplingParams::default()
        };
        prop_assert!(params.validate().is_ok());
        let mut row = logits.clone();
        let mut rng = SamplerRng::from_seed(1);
        let out = Sampler::new().sample(&mut row, SampleInput {
            params: &params,
            prompt: &[],
            output: &[],
            eos_token_ids: &[],
            rng: &mut rng,
            allowed: None,
        });
        // The argmax of the biased row (a uniform bias can only merge near-ties, which go to
        // the lower id).
        let biased: Vec<f32> = logits.iter().map(|x| x + bias_on_all).collect();
        let best = biased
            .iter()
            .enumerate()
            .fold(0, |best, (i, &x)| if x > biased[best] { i } else { best });
        prop_assert_eq!(out.token as usize, best);
        prop_assert!(out.logprob.is_finite());
    }
}
