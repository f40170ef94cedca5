//! The run budget as the scheduler applies it: spend so far plus an estimate of what the trials
//! in flight will cost.
//!
//! The results store knows the cost of finished attempts only; a trial that is running has
//! spent money the store does not show yet. So each active trial is charged an estimate: the
//! mean cost of its variant's finished trials (agent and judge spend of the variant, divided by
//! its trials with an agent outcome — see [`variant_mean_costs`]), or, while the variant has none
//! finished, a configurable prior ([`Budget::prior_usd`]; [`prior_usd`] picks the controller's
//! setting, else the run's `maxTrialUSD`, else zero). Active Jobs that are not a planned trial's
//! latest attempt are charged the prior.
//!
//! Creation stops when `spent + in-flight estimate ≥ maxUSD`. A trial the scheduler starts is
//! in flight from that moment, so within one decision each start adds its estimate before the
//! next is considered: the run starts trials while the projected spend is below the budget,
//! overshooting it by less than one trial's estimate when the estimates are right. Nothing is
//! remembered: when `maxUSD` is raised (or finished trials turn out cheaper than estimated) the
//! gate opens on the next decision.
//!
//! Amounts are summed as whole micro-dollars (rounded to the nearest), so the sum does not
//! depend on the order it is taken in and a restarted controller reaches the same verdict to
//! the last digit.

use lightsout_api::variant::Variant;
use lightsout_api::BudgetSpec;
use lightsout_core::summary::{OutcomeCounts, RunSummary, SpendSummary};

/// What the budget check reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget<'a> {
    /// `spec.budget.maxUSD`; `None`: no limit.
    pub max_usd: Option<f64>,
    /// Recorded spend of the run so far (agents and judges, infrastructure failures included).
    pub spent_usd: f64,
    /// Mean cost of a finished trial of each variant, by the plan's variant index; `None` (or
    /// an index past the end) while the variant has no finished trial.
    pub variant_mean_usd: &'a [Option<f64>],
    /// The estimate for a trial whose variant has no finished trial yet.
    pub prior_usd: f64,
}

impl Budget<'_> {
    /// No limit.
    pub const UNLIMITED: Budget<'static> =
        Budget { max_usd: None, spent_usd: 0.0, variant_mean_usd: &[], prior_usd: 0.0 };

    /// The in-flight estimate for a trial of variant `variant`, in micro-dollars.
    pub(crate) fn estimate_micros(&self, variant: u32) -> u64 {
        let mean = self.variant_mean_usd.get(variant as usize).copied().flatten();
        match mean.filter(|m| m.is_finite() && *m >= 0.0) {
            Some(mean) => micros(mean),
            None => self.prior_micros(),
        }
    }

    /// The prior, in micro-dollars.
    pub(crate) fn prior_micros(&self) -> u64 {
        micros(self.prior_usd)
    }

    pub(crate) fn spent_micros(&self) -> u64 {
        micros(self.spent_usd)
    }

    /// The limit in micro-dollars; `None` when there is none. A limit that is not a positive
    /// number (which the CRD rejects) allows nothing.
    pub(crate) fn max_micros(&self) -> Option<u64> {
        self.max_usd.map(|max| if max.is_nan() { 0 } else { micros(max) })
    }
}

/// Dollars to micro-dollars, rounded to the nearest; negative and NaN amounts count as zero, and amounts
/// too large saturate.
pub(crate) fn micros(usd: f64) -> u64 {
    if usd.is_nan() || usd <= 0.0 {
        return 0;
    }
    // `as` saturates at u64::MAX for amounts (and infinity) beyond it.
    (usd * 1e6).round() as u64
}

/// Micro-dollars to dollars.
pub(crate) fn usd(amount: u64) -> f64 {
    amount as f64 / 1e6
}

/// The in-flight estimate for a trial of a variant with no finished trial: `configured` (the
/// controller's setting) when given; else the run's `maxTrialUSD`, which bounds a trial's agent
/// spend (the metering proxy refuses calls past it); else zero, and until a variant's first
/// trial finishes only recorded spend counts against the budget.
pub fn prior_usd(spec: &BudgetSpec, configured: Option<f64>) -> f64 {
    configured.or(spec.max_trial_usd).filter(|p| p.is_finite() && *p >= 0.0).unwrap_or(0.0)
}

/// The mean cost per finished trial of each planned variant (by plan index), from the run's
/// summary ([`mean_cost`] of the summary's variant with the same id); `None` for a variant the
/// summary does not list or with no finished trial.
pub fn variant_mean_costs(variants: &[Variant], summary: Option<&RunSummary>) -> Vec<Option<f64>> {
    variants
        .iter()
        .map(|variant| {
            let listed = summary?.variants.iter().find(|v| v.id == variant.id)?;
            mean_cost(&listed.trials, &listed.spend)
        })
        .collect()
}

/// A variant's mean cost per finished trial: its total spend (agent and judges, so a running
/// trial's judging is covered; its infrastructure failures' spend included, which errs high)
/// over its trials with an agent outcome. `None` when it has none.
pub fn mean_cost(trials: &OutcomeCounts, spend: &SpendSummary) -> Option<f64> {
    let finished = trials.ok + trials.agent_failed + trials.timed_out + trials.budget_exceeded;
    (finished > 0).then(|| spend.total_usd / f64::from(finished))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_use_the_variant_mean_or_the_prior() {
        let means = [Some(0.25), None, Some(f64::NAN), Some(-1.0)];
        let budget = Budget { max_usd: Some(10.0), spent_usd: 1.5, variant_mean_usd: &means, prior_usd: 0.1 };
        let cases = [(0, 250_000), (1, 100_000), (2, 100_000), (3, 100_000), (4, 100_000)];
        for (variant, expected) in cases {
            assert_eq!(budget.estimate_micros(variant), expected, "variant {variant}");
        }
        assert_eq!(budget.spent_micros(), 1_500_000);
        assert_eq!(budget.max_micros(), Some(10_000_000));
        assert_eq!(Budget::UNLIMITED.max_micros(), None);
    }

    #[test]
    fn the_prior_is_the_setting_then_the_trial_limit_then_zero() {
        let spec = |max_trial_usd| BudgetSpec { max_usd: Some(100.0), max_trial_tokens: None, max_trial_usd };
        let cases = [
            (Some(0.75), Some(2.0), 0.75),
            (None, Some(2.0), 2.0),
            (None, None, 0.0),
            (Some(f64::NAN), Some(2.0), 0.0),
            (Some(-1.0), None, 0.0),
        ];
        for (configured, limit, prior) in cases {
            assert_eq!(prior_usd(&spec(limit), configured), prior, "{configured:?} {limit:?}");
        }
    }

    #[test]
    fn mean_cost_is_total_spend_over_trials_with_an_agent_outcome() {
        let counts = |ok, agent_failed, timed_out, budget_exceeded, infra_failed| OutcomeCounts {
            planned: 100,
            pending: 0,
            ok,
            agent_failed,
            timed_out,
            budget_exceeded,
            infra_failed,
            unjudged: 0,
            preempted: 0,
        };
        let spend = SpendSummary { agent_usd: 3.0, judge_usd: 1.0, total_usd: 4.0, unpriced_calls: 0 };
        let cases = [
            (counts(0, 0, 0, 0, 0), None),
            (counts(0, 0, 0, 0, 3), None),
            (counts(4, 0, 0, 0, 0), Some(1.0)),
            (counts(2, 3, 2, 1, 0), Some(0.5)),
            (counts(1, 1, 0, 0, 6), Some(2.0)),
        ];
        for (trials, mean) in cases {
            assert_eq!(mean_cost(&trials, &spend), mean, "{trials:?}");
        }
        assert_eq!(variant_mean_costs(&[], None), []);
    }

    #[test]
    fn micros_round_to_nearest_and_saturate() {
        let cases = [
            (0.0, 0),
            (-3.0, 0),
            (f64::NAN, 0),
            (0.000_000_4, 0),
            (0.000_000_6, 1),
            (0.1 + 0.2, 300_000),
            (1.000_000_4, 1_000_000),
            (f64::INFINITY, u64::MAX),
        ];
        for (amount, expected) in cases {
            assert_eq!(micros(amount), expected, "{amount}");
        }
        assert_eq!(usd(2_500_000), 2.5);
    }
}
