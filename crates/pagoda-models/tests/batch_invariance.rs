//! A sequence's logits must not depend on how it is run: alone, batched with sequences of
//! other lengths, as one prefill, or as chunked prefill followed by decode steps, with
//! scattered block tables throughout.

mod common;

use common::*;
use pagoda_models::ForwardBatch;

const TOLERANCE: f32 = 1e-5;

#[test]
fn logits_agree_alone_and_batched_with_other_lengths() {
    for name in MODELS {
        let cases = reference_cases(name);
        let mut runner = runner(name, 128);
        let alone: Vec<Vec<f32>> = cases
            .iter()
            .enumerate()
            .map(|(i, c)| {
                run_alone(&mut runner, &c.input_ids, 0, i as u64)
                    .0
                    .remove(0)
            })
            .collect();

        let mut alloc = ScatteredBlocks::new(128, 7);
        let mut seqs: Vec<Sequence> = cases.iter().map(|c| Sequence::new(&c.input_ids)).collect();
        let mut batch = ForwardBatch::new(BLOCK_SIZE);
        for seq in seqs.iter_mut() {
            let n = seq.tokens.len();
            seq.schedule(n, &mut batch, &mut alloc);
        }
        let logits = runner.forward(&batch).unwrap();
        for (i, want) in alone.iter().enumerate() {
            let diff = max_abs_diff(logits.row(i), want);
            assert!(diff <= TOLERANCE, "{name} case {i}: {diff}");
        }
    }
}

#[test]
fn chunked_prefill_and_mixed_decode_steps_agree_with_one_prefill() {
    for name in MODELS {
        let cases = reference_cases(name);
        let long = cases.iter().max_by_key(|c| c.input_ids.len()).unwrap();
        let short = cases
            .iter()
            .find(|c| c.input_ids.len() > 1 && c.input_ids.len() < 20)
            .unwrap();
        let mut runner = runner(name, 128);
        let steps = 6;
        let (want_long, tokens_long) = run_alone(&mut runner, &long.input_ids, steps, 1);
        let (want_short, tokens_short) = run_alone(&mut runner, &short.input_ids, steps, 2);

        // The long prompt goes in chunks of 37 while the short one prefills and then decodes
        // beside it; both then decode together.
        let mut alloc = ScatteredBlocks::new(128, 3);
        let mut long_seq = Sequence::new(&long.input_ids);
        let mut short_seq = Sequence::new(&short.input_ids);
        let mut got_long = Vec::new();
        let mut got_short = Vec::new();
        while got_long.len() <= steps || got_short.len() <= steps {
            let mut batch = ForwardBatch::new(BLOCK_SIZE);
            let mut rows = Vec::new();
            for (id, seq, got) in [
                (0, &mut long_seq, &got_long),
                (1, &mut short_seq, &got_short),
            ] {
                let remaining = seq.tokens.len() - seq.computed;
                if got.len() <= steps && remaining > 0 {
                    seq.schedule(remaining.min(37), &mut batch, &mut alloc);
                    rows.push((id, seq.computed == seq.tokens.len()));
                }
            }
            let logits = runner.forward(&batch).unwrap();
            for (row, (id, at_end)) in rows.into_iter().enumerate() {
                if !at_end {
                    continue;
                }
                let (seq, got, forced) = if id == 0 {
                    (&mut long_seq, &mut got_long, &tokens_long)
                } else {
                    (&mut short_seq, &mut got_short, &tokens_short)
                };
                got.push(logits.row(row).to_vec());
                if got.len() <= steps {
                    seq.tokens.push(forced[got.len() - 1]);
                }
            }
        }
        for (step, (g, w)) in got_long.iter().zip(&want_long).enumerate() {
            let diff = max_abs_diff(g, w);
            assert!(diff <= TOLERANCE, "{name} long step {step}: {diff}");
        }
        for (step, (g, w)) in got_short.iter().zip(&want_short).enumerate() {
            let diff = max_abs_diff(g, w);
            assert!(diff <= TOLERANCE, "{name} short step {step}: {diff}");
        }
    }
}

/// The kernels sum every product in one fixed order on every path, so a model's logits are
/// bitwise the same on the scalar, AVX2 and AVX-512 paths (those this CPU has), through a
/// first prefill chunk, the rest of the prompts, and a decode step.
#[test]
fn logits_are_bitwise_the_same_on_every_kernel_path() {
    use pagoda_models::Isa;
    for name in MODELS {
        let cases = reference_cases(name);
        let run = |isa: Isa| -> Vec<f32> {
            let mut runner = runner_on(name, 128, isa);
            let mut alloc = ScatteredBlocks::new(128, 5);
            let mut seqs: Vec<Sequence> =
                cases.iter().map(|c| Sequence::new(&c.input_ids)).collect();
            let mut out = Vec::new();
            for round in 0..3 {
                let mut batch = ForwardBatch::new(BLOCK_SIZE);
                for seq in seqs.iter_mut() {
                    if round == 2 {
                        seq.tokens.push(1);
                    }
                    let left = seq.tokens.len() - seq.computed;
                    let n = if round == 0 { left.div_ceil(2) } else { left };
                    if n > 0 {
                        seq.schedule(n, &mut batch, &mut alloc);
                    }
                }
                out.extend(runner.forward(&batch).unwrap().data);
            }
            out
        };
        let want = run(Isa::Scalar);
        for isa in Isa::supported() {
            let got = run(isa);
            assert_eq!(got.len(), want.len());
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{name}: {isa} logits differ from the scalar path");
        }
    }
}
