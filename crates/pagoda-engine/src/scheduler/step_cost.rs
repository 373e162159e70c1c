//! What a step costs in time: a linear model over the step's shape, fitted online from measured
//! step times, so that the scheduler can size prefill chunks to a latency target instead of a
//! token count.
//!
//! time = base + per_token * tokens + per_sampled * rows sampled + per_attended * keys attended
//!
//! On a CPU the base is mostly reading the weights once, the per-token term the matmuls, the
//! attended term attention over the context, and the sampled term the logits head and sampler.
//! Coefficients are never negative (a non-negative least-squares fit over a window of recent
//! steps), so a longer chunk never predicts a shorter step.

use super::batch::ScheduledBatch;
use std::collections::VecDeque;

/// The parts of a step its time depends on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepShape {
    /// Tokens run: prefill chunks and decodes.
    pub tokens: f64,
    /// Rows of logits sampled.
    pub sampled: f64,
    /// Over every new token, the keys it attends to (its context, itself included).
    pub attended: f64,
}

impl StepShape {
    /// `num_new` tokens of one request from position `num_computed`.
    pub fn chunk(num_computed: usize, num_new: usize, sampled: bool) -> Self {
        let (c, n) = (num_computed as f64, num_new as f64);
        StepShape {
            tokens: n,
            sampled: if sampled { 1.0 } else { 0.0 },
            attended: n * c + n * (n + 1.0) / 2.0,
        }
    }

    pub fn of(batch: &ScheduledBatch) -> Self {
        let mut shape = StepShape::default();
        for entry in &batch.requests {
            shape.add(StepShape::chunk(
                entry.num_computed_tokens,
                entry.num_new_tokens,
                entry.needs_logits,
            ));
        }
        shape
    }

    pub fn add(&mut self, other: StepShape) {
        self.tokens += other.tokens;
        self.sampled += other.sampled;
        self.attended += other.attended;
    }

    /// Intercept first, in the order of `StepCostModel`'s coefficients.
    fn features(&self) -> [f64; FEATURES] {
        [1.0, self.tokens, self.sampled, self.attended]
    }
}

const FEATURES: usize = 4;

/// Milliseconds per unit of each part of a step; every coefficient is at least zero.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepCostModel {
    pub base_ms: f64,
    pub per_token_ms: f64,
    pub per_sampled_ms: f64,
    pub per_attended_ms: f64,
}

impl StepCostModel {
    /// The whole step's time.
    pub fn predict_ms(&self, shape: &StepShape) -> f64 {
        self.base_ms + self.extra_ms(shape)
    }

    /// What `shape` adds to a step that runs anyway.
    pub fn extra_ms(&self, shape: &StepShape) -> f64 {
        self.per_token_ms * shape.tokens
            + self.per_sampled_ms * shape.sampled
            + self.per_attended_ms * shape.attended
    }

    fn from_coefficients(c: [f64; FEATURES]) -> Self {
        StepCostModel {
            base_ms: c[0],
            per_token_ms: c[1],
            per_sampled_ms: c[2],
            per_attended_ms: c[3],
        }
    }
}

/// Steps the fit remembers: recent enough to follow a machine whose speed drifts.
const WINDOW: usize = 64;
/// Fewest steps before the fit is trusted.
const MIN_STEPS: usize = 4;

/// The model fitted to the last `WINDOW` measured steps.
#[derive(Clone, Debug, Default)]
pub struct StepCostFit {
    steps: VecDeque<(StepShape, f64)>,
    model: Option<StepCostModel>,
}

impl StepCostFit {
    /// Records one measured step; times that are not finite and positive are ignored.
    pub fn observe(&mut self, shape: StepShape, ms: f64) {
        if !(ms.is_finite() && ms > 0.0) || shape.tokens <= 0.0 {
            return;
        }
        if self.steps.len() == WINDOW {
            self.steps.pop_front();
        }
        self.steps.push_back((shape, ms));
        // A window of like steps cannot be fitted; the last model stands meanwhile.
        self.model = self.fit().or(self.model);
    }

    /// Steps measured (at most the window).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// `None` until the window has held enough steps of different sizes to tell a step's
    /// fixed cost from its per-token cost (steps of one size alone cannot).
    pub fn model(&self) -> Option<StepCostModel> {
        self.model
    }

    fn fit(&self) -> Option<StepCostModel> {
        if self.steps.len() < MIN_STEPS {
            return None;
        }
        let tokens = self.steps.iter().map(|(s, _)| s.tokens);
        let (least, most) = tokens.fold((f64::MAX, 0.0f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if most < 2.0 * least {
            return None;
        }
        let rows: Vec<([f64; FEATURES], f64)> = self
            .steps
            .iter()
            .map(|(s, ms)| (s.features(), *ms))
            .collect();
        non_negative_least_squares(&rows).map(StepCostModel::from_coefficients)
    }
}

/// Least squares with every coefficient >= 0, exactly: with four unknowns, every subset of free
/// coefficients (the rest held at zero) is solved and the best solution with no negative
/// coefficient wins. Columns are scaled to at most 1 first, as the features span ten orders of
/// magnitude.
fn non_negative_least_squares(rows: &[([f64; FEATURES], f64)]) -> Option<[f64; FEATURES]> {
    let mut scale = [0.0f64; FEATURES];
    for (x, _) in rows {
        for j in 0..FEATURES {
            scale[j] = scale[j].max(x[j].abs());
        }
    }
    let mut best: Option<([f64; FEATURES], f64)> = None;
    for subset in 1u32..(1 << FEATURES) {
        let free: Vec<usize> = (0..FEATURES)
            .filter(|&j| subset & (1 << j) != 0 && scale[j] > 0.0)
            .collect();
        if free.len() != subset.count_ones() as usize {
            continue; // A feature that is zero in every step cannot be fitted.
        }
        let Some(solution) = solve_subset(rows, &free, &scale) else {
            continue;
        };
        if solution.iter().any(|&c| c < 0.0) {
            continue;
        }
        let residual: f64 = rows
            .iter()
            .map(|(x, y)| {
                let predicted: f64 = (0..FEATURES).map(|j| solution[j] * x[j]).sum();
                (predicted - y).powi(2)
            })
            .sum();
        if best.is_none_or(|(_, r)| residual < r) {
            best = Some((solution, residual));
        }
    }
    best.map(|(solution, _)| solution)
}

/// The normal equations over the `free` columns (scaled), by Gaussian elimination with partial
/// pivoting; `None` when they are singular.
fn solve_subset(
    rows: &[([f64; FEATURES], f64)],
    free: &[usize],
    scale: &[f64; FEATURES],
) -> Option<[f64; FEATURES]> {
    let k = free.len();
    let mut a = vec![vec![0.0f64; k + 1]; k];
    for (x, y) in rows {
        let z: Vec<f64> = free.iter().map(|&j| x[j] / scale[j]).collect();
        for r in 0..k {
            for c in 0..k {
                a[r][c] += z[r] * z[c];
            }
            a[r][k] += z[r] * y;
        }
    }
    for col in 0..k {
        let pivot = (col..k).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= factor * p;
                }
            }
        }
    }
    let mut solution = [0.0f64; FEATURES];
    for (i, &j) in free.iter().enumerate() {
        solution[j] = a[i][k] / a[i][i] / scale[j];
    }
    Some(solution)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truth() -> StepCostModel {
        StepCostModel {
            base_ms: 30.0,
            per_token_ms: 4.0,
            per_sampled_ms: 0.5,
            per_attended_ms: 0.0001,
        }
    }

    #[test]
    fn a_chunk_attends_to_its_context_and_itself() {
        // Three tokens from position 10 see 11, 12 and 13 keys.
        let shape = StepShape::chunk(10, 3, true);
        assert_eq!(shape.attended, 36.0);
        assert_eq!((shape.tokens, shape.sampled), (3.0, 1.0));
        assert_eq!(StepShape::chunk(0, 1, false).attended, 1.0);
    }

    #[test]
    fn the_fit_recovers_the_model_that_made_the_times() {
        let model = truth();
        let mut fit = StepCostFit::default();
        let shapes = [
            (0, 1, 8),
            (100, 64, 3),
            (500, 1, 32),
            (0, 256, 1),
            (1000, 16, 12),
            (40, 128, 5),
        ];
        for &(context, chunk, decodes) in shapes.iter().cycle().take(24) {
            let mut shape = StepShape::chunk(context, chunk, true);
            for d in 0..decodes {
                shape.add(StepShape::chunk(200 + 10 * d, 1, true));
            }
            fit.observe(shape, model.predict_ms(&shape));
        }
        let fitted = fit.model().expect("enough varied steps");
        for (got, want) in [
            (fitted.base_ms, model.base_ms),
            (fitted.per_token_ms, model.per_token_ms),
            (fitted.per_sampled_ms, model.per_sampled_ms),
            (fitted.per_attended_ms, model.per_attended_ms),
        ] {
            assert!(
                (got - want).abs() <= 1e-6 * want.max(1.0),
                "{got} vs {want}"
            );
        }
    }

    #[test]
    fn coefficients_are_never_negative() {
        // Times that fall as steps grow would need a negative per-token cost.
        let mut fit = StepCostFit::default();
        for (tokens, ms) in [(1, 50.0), (4, 40.0), (16, 30.0), (64, 20.0), (2, 45.0)] {
            fit.observe(StepShape::chunk(0, tokens, true), ms);
        }
        let m = fit.model().unwrap();
        for c in [
            m.base_ms,
            m.per_token_ms,
            m.per_sampled_ms,
            m.per_attended_ms,
        ] {
            assert!(c >= 0.0, "{m:?}");
        }
    }

    #[test]
    fn steps_of_one_size_do_not_make_a_model() {
        let mut fit = StepCostFit::default();
        for _ in 0..10 {
            fit.observe(StepShape::chunk(100, 8, true), 40.0);
        }
        assert_eq!(fit.model(), None);
        fit.observe(StepShape::chunk(0, 8, true), f64::NAN);
        fit.observe(StepShape::chunk(0, 64, true), -1.0);
        assert_eq!(fit.model(), None, "bad times are ignored");
        fit.observe(StepShape::chunk(0, 64, true), 200.0);
        assert!(fit.model().is_some(), "two sizes now");
        for _ in 0..WINDOW {
            fit.observe(StepShape::chunk(100, 8, true), 40.0);
        }
        assert!(
            fit.model().is_some(),
            "a window of like steps keeps the last model"
        );
    }

    #[test]
    fn the_window_follows_a_machine_that_slows_down() {
        let mut fit = StepCostFit::default();
        let fast = truth();
        let slow = StepCostModel {
            per_token_ms: 8.0,
            ..fast
        };
        for model in [fast, slow] {
            for i in 0..WINDOW {
                let shape = StepShape::chunk(i * 7, 1 + i % 50, true);
                fit.observe(shape, model.predict_ms(&shape));
            }
        }
        let got = fit.model().unwrap().per_token_ms;
        assert!((got - 8.0).abs() < 1e-6, "{got}");
    }
}
