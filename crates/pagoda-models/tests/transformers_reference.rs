//! Logits and greedy continuations against what Hugging Face transformers computed for the
//! same weights (scripts/make_fixtures.py).

mod common;

use common::*;
use pagoda_models::WeightDtype;

#[test]
fn last_position_logits_match_transformers_within_1e4() {
    for name in MODELS {
        let mut runner = runner(name, 64);
        for (i, case) in reference_cases(name).iter().enumerate() {
            let (logits, _) = run_alone(&mut runner, &case.input_ids, 0, i as u64);
            let diff = max_abs_diff(&logits[0], &case.last_logits);
            assert!(
                diff < 1e-4,
                "{name} case {i} ({} tokens): max |diff| {diff}",
                case.input_ids.len()
            );
        }
    }
}

#[test]
fn greedy_continuations_equal_transformers() {
    for name in MODELS {
        let mut runner = runner(name, 64);
        for (i, case) in reference_cases(name).iter().enumerate() {
            let (_, generated) = run_alone(
                &mut runner,
                &case.input_ids,
                case.greedy_ids.len(),
                100 + i as u64,
            );
            assert_eq!(
                generated, case.greedy_ids,
                "{name} case {i} {:?}",
                case.prompt
            );
        }
    }
}

/// A 16-bit KV cache rounds every cached key and value (f16: 11 significant bits, bf16: 8).
/// Over the fixtures (logits up to about 8 in magnitude) the largest moves measured were
/// 4.1e-3 (f16) and 0.039 (bf16), about each type's precision; the bounds leave 2.5x.
#[test]
fn sixteen_bit_kv_caches_stay_close_to_transformers() {
    for (dtype, tolerance) in [(WeightDtype::F16, 1e-2), (WeightDtype::BF16, 8e-2)] {
        for name in MODELS {
            let mut runner = runner_with_kv(name, 64, dtype);
            for (i, case) in reference_cases(name).iter().enumerate() {
                let (logits, _) = run_alone(&mut runner, &case.input_ids, 0, i as u64);
                let diff = max_abs_diff(&logits[0], &case.last_logits);
                assert!(
                    diff < tolerance,
                    "{dtype} {name} case {i}: max |diff| {diff}"
                );
                // And it is not the f32 cache in disguise.
                let mut f32_runner = runner_with_kv(name, 64, WeightDtype::F32);
                let (exact, _) = run_alone(&mut f32_runner, &case.input_ids, 0, i as u64);
                if case.input_ids.len() > 1 {
                    assert_ne!(logits[0], exact[0], "{dtype} {name} case {i}");
                }
            }
        }
    }
}
