//! Statistics over evaluation results: bootstrap confidence intervals that respect the grouping of
//! repeats by task, paired comparisons of two variants, and agreement within the judge panel.
//!
//! Rules shared by every function here:
//! - Functions are pure: the same inputs (and seed) give the same bits, whatever the input order
//!   and however many threads the machine has. Inputs are put in a canonical order first (tasks by
//!   their key, samples by (task, repeat)), so reordering the input never changes a result.
//! - A *task* is the unit of resampling (a cluster): all samples of one task (its repeats) are drawn
//!   together, because repeats of one task are not independent evidence.
//! - Values and weights must be finite, weights ≥ 0; anything else is a [`StatsError`], never a
//!   silent NaN.
//!
//! See [`bootstrap`] for the interval rule, [`paired`] for the pairing rule and [`agreement`] for
//! the judge agreement measures.

pub mod agreement;
pub mod bootstrap;
pub mod mcnemar;
pub mod paired;

#[cfg(test)]
mod tests;

pub use agreement::{agreement, fleiss_kappa, fleiss_kappa_counts, Agreement, FleissKappa, PairAgreement};
pub use bootstrap::{
    bootstrap_columns, bootstrap_mean, BootstrapConfig, Cluster, Interval, DEFAULT_CONFIDENCE, DEFAULT_RESAMPLES,
};
pub use mcnemar::{mcnemar, mcnemar_exact_ln_p, McNemar};
pub use paired::{pair_samples, paired_bootstrap, paired_bootstrap_columns, PairedDifference, Pairing, Sample};

/// Why a statistic could not be computed from its input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what} must be finite, got {value}")]
    NotFinite { what: &'static str, value: f64 },
    #[error("task weight must be ≥ 0, got {0}")]
    NegativeWeight(f64),
    #[error("task {0} appears more than once")]
    DuplicateTask(String),
    #[error("task {task} repeat {repeat} appears more than once")]
    DuplicateSample { task: String, repeat: u32 },
    #[error("task {task} repeat {repeat} has {found} values, but the first sample has {expected}")]
    RaggedSample { task: String, repeat: u32, expected: usize, found: usize },
    #[error("column {column} does not cover the same tasks as column 0")]
    MismatchedTasks { column: usize },
    #[error("item {item} has {found} votes, but the first item has {expected}")]
    RaggedVotes { item: usize, expected: usize, found: usize },
    #[error("item {item} has {found} ratings, but the first item has {expected}")]
    RaggedCounts { item: usize, expected: u64, found: u64 },
    #[error("invalid bootstrap configuration: {0}")]
    InvalidConfig(&'static str),
}

fn check_finite(what: &'static str, value: f64) -> Result<(), StatsError> {
    if value.is_finite() {
        Ok(())
    } else {
        Err(StatsError::NotFinite { what, value })
    }
}
