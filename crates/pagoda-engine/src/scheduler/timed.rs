//! Steps sized by time: while a latency target applies, a step runs every decode, then prefill
//! chunks only as long as the step-cost model says the step stays under the target. A step that
//! carries a long prefill chunk would otherwise hold every running decode for seconds on a CPU.

use super::step_cost::{StepCostFit, StepCostModel, StepShape};
use super::Scheduler;

/// Prefill tokens per step while no cost model is fitted yet, in turn: small, so the first
/// steps stay short, and of different sizes, so that the fit can tell a step's fixed cost from
/// its per-token cost.
pub(super) const COLD_START_PREFILL_TOKENS: [usize; 3] = [16, 32, 64];

/// Where the step-cost model comes from.
#[derive(Clone, Debug)]
pub(super) enum CostSource {
    /// Fitted online from `record_step_time`.
    Fitted(StepCostFit),
    /// Given (tests, or an operator who measured it).
    Fixed(StepCostModel),
}

impl CostSource {
    pub(super) fn model(&self) -> Option<StepCostModel> {
        match self {
            CostSource::Fitted(fit) => fit.model(),
            CostSource::Fixed(model) => Some(*model),
        }
    }
}

/// The time one step has left while it is being planned.
#[derive(Clone, Debug)]
pub(super) struct TimeLeft {
    model: Option<StepCostModel>,
    /// Under the target, after what is planned so far (negative once decodes overrun it).
    left_ms: f64,
    /// Without a model: prefill tokens still allowed this step.
    cold_tokens: usize,
    floor_tokens: usize,
    prefill_planned: usize,
}

impl TimeLeft {
    fn new(
        target_ms: f64,
        model: Option<StepCostModel>,
        floor_tokens: usize,
        steps_measured: usize,
    ) -> Self {
        let cold = COLD_START_PREFILL_TOKENS;
        TimeLeft {
            left_ms: target_ms - model.map_or(0.0, |m| m.base_ms),
            model,
            cold_tokens: cold[steps_measured % cold.len()],
            floor_tokens,
            prefill_planned: 0,
        }
    }

    /// How many of the next `cap` prompt tokens of a request at position `num_computed` fit
    /// in the time left (`remaining`: its tokens left to compute, so the last one's sampling
    /// is counted); at least the floor while no prefill is planned in this step yet.
    pub(super) fn prefill_tokens(
        &self,
        num_computed: usize,
        cap: usize,
        remaining: usize,
    ) -> usize {
        let fits = match &self.model {
            None => cap.min(self.cold_tokens),
            Some(model) => {
                let cost =
                    |k: usize| model.extra_ms(&StepShape::chunk(num_computed, k, k == remaining));
                // Costs grow with k (no coefficient is negative): the largest k that fits.
                let (mut lo, mut hi) = (0usize, cap);
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if cost(mid) <= self.left_ms {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                lo
            }
        };
        if self.prefill_planned == 0 {
            fits.max(self.floor_tokens.min(cap))
        } else {
            fits
        }
    }

    /// Counts a planned entry against the time left.
    pub(super) fn charge(
        &mut self,
        num_computed: usize,
        num_new: usize,
        sampled: bool,
        prefill: bool,
    ) {
        if let Some(model) = &self.model {
            self.left_ms -= model.extra_ms(&StepShape::chunk(num_computed, num_new, sampled));
        }
        if prefill {
            self.cold_tokens = self.cold_tokens.saturating_sub(num_new);
            self.prefill_planned += num_new;
        }
    }
}

impl Scheduler {
    /// The time budget of the next step: `None` (size by tokens) unless the config or a running
    /// request sets a target.
    pub(super) fn time_left(&self) -> Option<TimeLeft> {
        let running = self
            .running
            .iter()
            .filter_map(|id| self.requests[id].itl_target_ms);
        let target = self.config.target_itl_ms.into_iter().chain(running).min()?;
        let measured = match &self.cost {
            CostSource::Fitted(fit) => fit.len(),
            CostSource::Fixed(_) => 0,
        };
        Some(TimeLeft::new(
            f64::from(target),
            self.cost.model(),
            self.config.min_prefill_tokens,
            measured,
        ))
    }

    /// Feeds one measured step to the fitted cost model (a given model is kept as it is).
    pub fn record_step_time(
        &mut self,
        batch: &super::ScheduledBatch,
        elapsed: std::time::Duration,
    ) {
        if let CostSource::Fitted(fit) = &mut self.cost {
            fit.observe(StepShape::of(batch), elapsed.as_secs_f64() * 1e3);
        }
    }

    /// Sizes timed steps with `model` from now on instead of fitting one.
    pub fn set_step_cost_model(&mut self, model: StepCostModel) {
        self.cost = CostSource::Fixed(model);
    }

    /// The model timed steps are sized with; `None` while too few steps were measured.
    pub fn step_cost_model(&self) -> Option<StepCostModel> {
        self.cost.model()
    }
}
