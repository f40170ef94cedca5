//! What the controller observed of a run's trials in one reconcile, folded to one state per
//! trial.
//!
//! The reconciler lists the run's Jobs (one per trial attempt, labelled with run, variant,
//! trial and attempt) and reads the results store, and records every attempt it sees with
//! [`Observation::record`]:
//!
//! | seen | recorded as |
//! | --- | --- |
//! | a Job that has not finished (its pod pending or running) | [`AttemptState::Active`] |
//! | a Job that completed (worker exit 0), or a `result.json` with an agent outcome (`ok`, `agent-failed`, `timed-out`, `budget-exceeded`) | [`AttemptState::Finished`] |
//! | a Job that failed: worker exit code 3, pod evicted, image pull back-off, node lost, pod never started (the Job's deadline passed before its pod ran); or a `result.json` with outcome `infra-failed` | [`AttemptState::InfraFailed`] with the time it failed |
//!
//! Attempt numbers come from the Jobs' and results' labels and paths only, so the fold — and
//! every decision taken from it — is a function of what is observed, never of the controller's
//! memory. This puts one duty on the reconciler: **a failed Job of a trial that is not final
//! must not be deleted** (no `ttlSecondsAfterFinished` that could remove it first), unless the
//! failure is also recorded in the results store; otherwise its attempt number would be
//! forgotten and reused.
//!
//! The fold keeps, per trial, the highest-numbered attempt seen. For one attempt seen twice
//! (its Job and its result), `Active` wins over `Finished`, which wins over `InfraFailed`: a
//! Job still running occupies its slot even after its result is stored, and a stored agent
//! result is the trial's result even if the pod was killed while exiting. Two infrastructure
//! failures of one attempt keep the later time. An active Job of an attempt lower than the
//! trial's latest (which a correct controller never creates) and an active Job of a trial that
//! is not in the plan (the spec changed) are counted in [`Observation::other_active`]: they hold
//! cluster capacity, so they count against `parallelism` too. The fold does not depend on the
//! order of the records.

use chrono::{DateTime, Utc};

/// Why an attempt failed for reasons outside the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InfraReason {
    /// The pod was evicted (node pressure, preemption, drain).
    Evicted,
    /// The image could not be pulled.
    ImagePull,
    /// The node running the pod was lost.
    NodeLost,
    /// The worker exited with code 3: it reported an infrastructure failure (provider 5xx,
    /// storage outage, harness install).
    WorkerExit,
    /// The pod never started before the Job's deadline (unschedulable, stuck pending).
    NeverStarted,
    /// Any other failure outside the agent.
    Other,
}

impl InfraReason {
    pub fn as_str(self) -> &'static str {
        match self {
            InfraReason::Evicted => "Evicted",
            InfraReason::ImagePull => "ImagePullBackOff",
            InfraReason::NodeLost => "NodeLost",
            InfraReason::WorkerExit => "WorkerInfraExit",
            InfraReason::NeverStarted => "NeverStarted",
            InfraReason::Other => "InfraFailure",
        }
    }
}

/// One observed attempt of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptState {
    /// Its Job exists and has not finished.
    Active,
    /// It ended with an agent outcome: the trial's result, never retried.
    Finished,
    /// It failed outside the agent at `at`.
    InfraFailed { at: DateTime<Utc>, reason: InfraReason },
}

/// A trial's latest observed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrialState {
    /// No attempt observed.
    #[default]
    NotStarted,
    /// Attempt `attempt` has an active Job.
    Active { attempt: u32 },
    /// Attempt `attempt` ended with an agent outcome: final.
    Finished { attempt: u32 },
    /// Attempt `attempt` failed outside the agent at `at`.
    InfraFailed { attempt: u32, at: DateTime<Utc>, reason: InfraReason },
}

impl TrialState {
    /// The latest observed attempt's number; 0 when none.
    pub fn attempt(&self) -> u32 {
        match *self {
            TrialState::NotStarted => 0,
            TrialState::Active { attempt } | TrialState::Finished { attempt } => attempt,
            TrialState::InfraFailed { attempt, .. } => attempt,
        }
    }

    fn of(attempt: u32, state: AttemptState) -> Self {
        match state {
            AttemptState::Active => TrialState::Active { attempt },
            AttemptState::Finished => TrialState::Finished { attempt },
            AttemptState::InfraFailed { at, reason } => TrialState::InfraFailed { attempt, at, reason },
        }
    }

    /// Precedence of states of the same attempt.
    fn rank(&self) -> u8 {
        match self {
            TrialState::NotStarted => 0,
            TrialState::InfraFailed { .. } => 1,
            TrialState::Finished { .. } => 2,
            TrialState::Active { .. } => 3,
        }
    }
}

/// The observed state of every planned trial, by index into the plan's trials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    trials: Vec<TrialState>,
    other_active: usize,
}

impl Observation {
    /// `trials` planned trials, none observed yet.
    pub fn new(trials: usize) -> Self {
        Observation { trials: vec![TrialState::NotStarted; trials], other_active: 0 }
    }

    /// Records attempt `attempt` (1-based) of planned trial `trial`. Record each Job and each
    /// stored result once.
    ///
    /// # Panics
    /// When `trial` is not an index of the plan's trials.
    pub fn record(&mut self, trial: usize, attempt: u32, state: AttemptState) {
        let current = self.trials[trial];
        let seen = TrialState::of(attempt, state);
        let latest = current.attempt();
        if current == TrialState::NotStarted || attempt > latest {
            // A newer attempt: an active Job of the older one is superseded but still running.
            if matches!(current, TrialState::Active { .. }) {
                self.other_active += 1;
            }
            self.trials[trial] = seen;
        } else if attempt < latest {
            if state == AttemptState::Active {
                self.other_active += 1;
            }
        } else {
            self.trials[trial] = match (current, seen) {
                (
                    TrialState::InfraFailed { at: a, reason: ra, .. },
                    TrialState::InfraFailed { at: b, reason: rb, .. },
                ) => {
                    let (at, reason) = (a, ra).max((b, rb));
                    TrialState::InfraFailed { attempt, at, reason }
                }
                _ if seen.rank() > current.rank() => seen,
                _ => current,
            };
        }
    }

    /// Records an active Job whose trial is not in the plan: it holds a slot.
    pub fn record_unplanned_active(&mut self) {
        self.other_active += 1;
    }

    /// The state of every planned trial, in plan order.
    pub fn trials(&self) -> &[TrialState] {
        &self.trials
    }

    /// Active Jobs that are not a planned trial's latest attempt.
    pub fn other_active(&self) -> usize {
        self.other_active
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000 + secs, 0).unwrap()
    }

    fn infra(secs: i64) -> AttemptState {
        AttemptState::InfraFailed { at: at(secs), reason: InfraReason::Evicted }
    }

    /// Records `records` in the given order and in reverse; both must fold the same.
    fn fold(records: &[(u32, AttemptState)]) -> (TrialState, usize) {
        let mut forward = Observation::new(1);
        for &(attempt, state) in records {
            forward.record(0, attempt, state);
        }
        let mut backward = Observation::new(1);
        for &(attempt, state) in records.iter().rev() {
            backward.record(0, attempt, state);
        }
        assert_eq!(forward, backward, "the fold depends on the order of {records:?}");
        (forward.trials()[0], forward.other_active())
    }

    #[test]
    fn the_latest_attempt_wins_and_same_attempt_precedence_applies() {
        use AttemptState::{Active, Finished};
        type Records = Vec<(u32, AttemptState)>;
        let cases: Vec<(&str, Records, TrialState, usize)> = vec![
            ("nothing", vec![], TrialState::NotStarted, 0),
            ("one active", vec![(1, Active)], TrialState::Active { attempt: 1 }, 0),
            ("retry running", vec![(1, infra(5)), (2, Active)], TrialState::Active { attempt: 2 }, 0),
            ("retry finished", vec![(1, infra(5)), (2, Finished)], TrialState::Finished { attempt: 2 }, 0),
            (
                "second failure",
                vec![(1, infra(5)), (2, infra(9))],
                TrialState::InfraFailed { attempt: 2, at: at(9), reason: InfraReason::Evicted },
                0,
            ),
            (
                "job still exiting after its result",
                vec![(1, Active), (1, Finished)],
                TrialState::Active { attempt: 1 },
                0,
            ),
            (
                "stored result over a killed pod",
                vec![(1, Finished), (1, infra(3))],
                TrialState::Finished { attempt: 1 },
                0,
            ),
            (
                "two failures of one attempt keep the later",
                vec![(3, infra(3)), (3, AttemptState::InfraFailed { at: at(7), reason: InfraReason::WorkerExit })],
                TrialState::InfraFailed { attempt: 3, at: at(7), reason: InfraReason::WorkerExit },
                0,
            ),
            ("superseded active attempt", vec![(1, Active), (2, Active)], TrialState::Active { attempt: 2 }, 1),
            ("older active behind a result", vec![(1, Active), (2, Finished)], TrialState::Finished { attempt: 2 }, 1),
            (
                "older finished is ignored",
                vec![(1, Finished), (2, infra(1))],
                { TrialState::InfraFailed { attempt: 2, at: at(1), reason: InfraReason::Evicted } },
                0,
            ),
        ];
        for (name, records, state, other) in cases {
            assert_eq!(fold(&records), (state, other), "{name}");
        }
    }

    #[test]
    fn unplanned_active_jobs_count_apart() {
        let mut observation = Observation::new(2);
        observation.record(1, 1, AttemptState::Active);
        observation.record_unplanned_active();
        assert_eq!(observation.trials(), [TrialState::NotStarted, TrialState::Active { attempt: 1 }]);
        assert_eq!(observation.other_active(), 1);
    }
}
