//! When the pod is stopped mid-attempt (SIGTERM: Kueue preempted the trial's Job, the pod was
//! evicted or deleted), the worker writes what the attempt's model calls cost so far as an
//! [`Interruption`] record beside the attempt's artifacts, then exits. The calls were paid for;
//! without the record they would be in no `result.json` (the attempt's next run writes its own,
//! from zero). See `lightsout_core::interruption` for how it is counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use lightsout_core::interruption::Interruption;
use lightsout_core::results::{ResultStore, RunLayout};
use lightsout_model::Usage;

/// How long the record may take to store: well inside Kubernetes' default 30 s grace period,
/// so the worker exits on its own before the kubelet's SIGKILL.
pub const RECORD_DEADLINE: Duration = Duration::from_secs(15);

/// What the attempt's finished model calls have cost so far, kept up to date by whoever meters
/// them (the single-shot harness, or the metering proxy of an agentic one), read when the worker
/// is told to stop.
#[derive(Debug, Clone, Default)]
pub struct SpendSoFar(Arc<Mutex<Spent>>, Arc<AtomicBool>);

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub usage: Usage,
    pub cost_usd: f64,
    pub unpriced_calls: u32,
    pub calls: u32,
}

impl SpendSoFar {
    /// Adds one finished call (or `calls` of them: a call the client retried); `cost` is `None`
    /// when its model has no price.
    pub fn add(&self, usage: Usage, cost: Option<f64>, calls: u32) {
        let mut spent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        spent.usage += usage;
        spent.calls += calls;
        match cost {
            Some(cost) => spent.cost_usd += cost,
            None if usage != Usage::default() => spent.unpriced_calls += calls,
            None => {}
        }
    }

    pub fn get(&self) -> Spent {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks the attempt's calls over: its result, holding their spend, is being stored.
    pub fn set_publishing(&self) {
        self.1.store(true, Ordering::SeqCst);
    }

    /// Whether the attempt's result is being stored (so it, not an interruption record, counts
    /// the calls).
    pub fn publishing(&self) -> bool {
        self.1.load(Ordering::SeqCst)
    }
}

/// Stores the record in one write, straight to the store (no spool: the pod and its disk are
/// going away), within [`RECORD_DEADLINE`]. A run stopped before any call finished is recorded
/// too: it is still a preempted run to count.
pub async fn record<S: ResultStore>(store: &S, record: &Interruption) -> std::io::Result<()> {
    let layout = RunLayout::new(&record.run);
    let key = layout.artifact(&record.variant_id, &record.trial_id, record.attempt, &record.file_name());
    let bytes = serde_json::to_vec_pretty(record)?;
    match tokio::time::timeout(RECORD_DEADLINE, store.put(&key, &bytes)).await {
        Ok(result) => result,
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("storing {} took longer than {}s", store.uri(&key), RECORD_DEADLINE.as_secs()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_adds_calls_and_keeps_unpriced_calls_apart() {
        let spend = SpendSoFar::default();
        let usage = Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() };
        spend.clone().add(usage, Some(0.5), 1);
        spend.add(usage, None, 2);
        spend.add(Usage::default(), None, 1);
        let spent = spend.get();
        assert_eq!((spent.calls, spent.unpriced_calls, spent.cost_usd), (4, 2, 0.5));
        assert_eq!(spent.usage.input_tokens, 20);
    }
}
