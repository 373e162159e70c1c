//! Logits and greedy continuations against what Hugging Face transformers computed for the
//! same weights (scripts/make_fixtures.py).

mod common;

use common::*;

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
