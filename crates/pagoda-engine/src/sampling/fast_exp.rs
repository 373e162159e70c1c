//! `exp` over a whole vocabulary row, fast enough that sampling stays a small part of a step.
//!
//! A draw needs `exp` of every logit, once for the logprob's normaliser and once for the
//! weights; with the f64 `exp` of libm that was about a millisecond per row per pass on a
//! 151,936-entry vocabulary, 32 rows one after another every step. Here `exp` is evaluated in
//! f32 by range reduction and a polynomial, written as plain lane-wise loops that the compiler
//! vectorises on any x86-64 (no target features: the same operations, so the same bits, on
//! every machine). Relative error below 2e-7 (tested against f64), which sampling and f32
//! logprobs cannot see.

/// Lanes of the explicit loops (four SSE registers per value; 8 lanes measured slower).
const LANES: usize = 16;
/// Elements summed in f32 lanes before the lane sums are added in f64: keeps a row's sum
/// accurate to about 1e-7 however long the row.
const SUM_BLOCK: usize = 256;

/// `exp(x)` for `x <= 88`; 0 for NaN and for `x < -87.3` (where f32 results are denormal).
#[inline(always)]
pub(super) fn exp_or_zero(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 in two parts, the first with trailing zero bits, so `k * LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer (for |v| < 2^22).
    const ROUND: f32 = 12_582_912.0;
    let keep = x >= -87.3;
    let x = if x > 88.0 { 88.0 } else { x };
    let x = if keep { x } else { 0.0 };
    let t = x * LOG2E + ROUND;
    let k = t - ROUND;
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Taylor to degree 7 on |r| <= ln(2)/2: truncation below 1e-8 relative.
    let p = 1.0 / 5040.0;
    let p = p * r + 1.0 / 720.0;
    let p = p * r + 1.0 / 120.0;
    let p = p * r + 1.0 / 24.0;
    let p = p * r + 1.0 / 6.0;
    let p = p * r + 0.5;
    let p = p * r + 1.0;
    let p = p * r + 1.0;
    // `k` as an integer, read from the low bits of `t` (a float-to-int cast would be scalar).
    let k_int = t.to_bits().wrapping_sub(ROUND.to_bits());
    let scale = f32::from_bits(k_int.wrapping_add(127) << 23);
    if keep {
        p * scale
    } else {
        0.0
    }
}

/// `out[i] = exp(x[i] - shift)`, 0 where that is NaN or below f32's normal range.
pub(super) fn exp_shifted(x: &[f32], shift: f32, out: &mut Vec<f32>) {
    out.clear();
    out.resize(x.len(), 0.0);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = exp_or_zero(v - shift);
    }
}

/// `sum(exp(x[i] - shift))` over the row, NaNs counting 0.
pub(super) fn sum_exp_shifted(x: &[f32], shift: f32) -> f64 {
    let mut total = 0.0f64;
    for block in x.chunks(SUM_BLOCK) {
        let mut lanes = [0.0f32; LANES];
        let mut chunks = block.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (acc, &v) in lanes.iter_mut().zip(chunk) {
                *acc += exp_or_zero(v - shift);
            }
        }
        for (acc, &v) in lanes.iter_mut().zip(chunks.remainder()) {
            *acc += exp_or_zero(v - shift);
        }
        total += lanes.iter().map(|&l| f64::from(l)).sum::<f64>();
    }
    total
}

/// The largest non-NaN value of the row (`-inf` if none).
pub(super) fn max_ignoring_nan(x: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            // A NaN compares false and is skipped.
            *m = if v > *m { v } else { *m };
        }
    }
    let tail = chunks.remainder().iter().copied();
    lanes
        .into_iter()
        .chain(tail)
        .fold(f32::NEG_INFINITY, |m, v| if v > m { v } else { m })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_2e_7_of_f64_over_the_range_sampling_uses() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            let got = f64::from(exp_or_zero(x));
            let want = f64::from(x).exp();
            worst = worst.max((got - want).abs() / want);
            x += 0.000_37;
        }
        assert!(worst < 2e-7, "worst relative error {worst:e}");
        assert_eq!(exp_or_zero(0.0), 1.0);
    }

    #[test]
    fn nan_negative_infinity_and_the_far_tail_are_zero_and_large_inputs_finite() {
        assert_eq!(exp_or_zero(f32::NAN), 0.0);
        assert_eq!(exp_or_zero(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_or_zero(-100.0), 0.0);
        assert!(exp_or_zero(f32::INFINITY).is_finite());
        assert!(exp_or_zero(1e30).is_finite());
    }

    #[test]
    fn row_sum_and_max_agree_with_f64_on_a_long_row_with_nans() {
        let row: Vec<f32> = (0..100_003)
            .map(|i| {
                if i % 977 == 0 {
                    f32::NAN
                } else {
                    ((i * 7919) % 2000) as f32 / 100.0 - 15.0
                }
            })
            .collect();
        let max = max_ignoring_nan(&row);
        let want_max = row
            .iter()
            .copied()
            .filter(|x| !x.is_nan())
            .fold(f32::MIN, f32::max);
        assert_eq!(max, want_max);
        let got = sum_exp_shifted(&row, max);
        let want: f64 = row
            .iter()
            .filter(|x| !x.is_nan())
            .map(|&x| f64::from(x - max).exp())
            .sum();
        assert!((got - want).abs() / want < 1e-6, "{got} vs {want}");
        let mut out = Vec::new();
        exp_shifted(&row, max, &mut out);
        assert_eq!(out.len(), row.len());
        assert_eq!(out[0], 0.0, "NaN weighs nothing");
        assert!((f64::from(out[1]) - f64::from(row[1] - max).exp()).abs() < 1e-7);
        assert_eq!(max_ignoring_nan(&[f32::NAN, f32::NAN]), f32::NEG_INFINITY);
    }
}
