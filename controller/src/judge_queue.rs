//! The judge queue: judging off the reconcile path. A reconcile hands the queue the finished
//! reviews that need verdicts ([`JudgeQueue::submit`]) and takes back the ones it judged
//! ([`JudgeQueue::take_finished`]); it never waits on a model, so a slow judge provider no
//! longer makes every reconcile of its run slow.
//!
//! - **Bounded**: at most `judge_concurrency` reviews are judged at once across all runs (each
//!   judge call is also held to its provider's adaptive limit by the model client), and a run
//!   holds at most `judge_batch` reviews in the queue, so one large run does not starve others.
//! - **Wakes the run**: a judged review wakes its run's reconcile ([`JudgeQueue::wakes`], fed to
//!   the run Controller), which stores what it judged in the run's state and the summary.
//! - **Nothing here is a source of truth**: a review's `verdicts.json` is stored before it is
//!   handed back, so a restarted controller, whose queue starts empty, reads the verdicts from
//!   the results store and hands over again the reviews still without them.
//! - **Stopping**: [`JudgeQueue::drain`] starts no more reviews and waits for those being
//!   judged, whose calls are then stored with their verdicts; a deleted run's reviews are
//!   dropped ([`JudgeQueue::forget_run`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc;
use kube::runtime::reflector::ObjectRef;
use lightsout_api::EvaluationRun;
use lightsout_core::scoring::Verdicts;
use tokio::sync::{Notify, Semaphore};
use tokio::task::AbortHandle;

/// New verdicts and the stored ones they were judged again from, whose calls are already metered.
pub struct Rejudged {
    pub verdicts: Verdicts,
    pub previous: Option<Verdicts>,
}

/// A review the queue judged, or why it could not.
pub struct Judged {
    pub trial_id: String,
    pub attempt: u32,
    pub outcome: Result<Rejudged, String>,
}

/// A trial's attempt: the review being judged.
type ReviewKey = (String, u32);

#[derive(Clone)]
pub struct JudgeQueue {
    inner: Arc<Inner>,
}

struct Inner {
    permits: Semaphore,
    per_run: usize,
    state: Mutex<QueueState>,
    /// Signalled whenever a review leaves the queue.
    left: Notify,
}

#[derive(Default)]
struct QueueState {
    /// By run uid.
    runs: HashMap<String, RunReviews>,
    wake: Option<mpsc::UnboundedSender<ObjectRef<EvaluationRun>>>,
}

#[derive(Default)]
struct RunReviews {
    judging: HashMap<ReviewKey, AbortHandle>,
    finished: Vec<Judged>,
}

impl JudgeQueue {
    /// `concurrency` reviews judged at once in all, at most `per_run` of one run in the queue.
    pub fn new(concurrency: usize, per_run: usize) -> Self {
        JudgeQueue {
            inner: Arc::new(Inner {
                permits: Semaphore::new(concurrency.max(1)),
                per_run: per_run.max(1),
                state: Mutex::new(QueueState::default()),
                left: Notify::new(),
            }),
        }
    }

    /// The runs to reconcile because a review of theirs was judged (one stream per queue: a
    /// later call replaces the earlier one). Without it, reconciles find the judged reviews
    /// when they next run.
    pub fn wakes(&self) -> mpsc::UnboundedReceiver<ObjectRef<EvaluationRun>> {
        let (sender, receiver) = mpsc::unbounded();
        self.inner.lock().wake = Some(sender);
        receiver
    }

    /// Whether this review of run `uid` is in the queue (waiting or being judged).
    pub fn is_queued(&self, uid: &str, trial_id: &str, attempt: u32) -> bool {
        let state = self.inner.lock();
        state.runs.get(uid).is_some_and(|run| run.judging.contains_key(&(trial_id.to_string(), attempt)))
    }

    /// How many more reviews of run `uid` the queue takes now.
    pub fn room(&self, uid: &str) -> usize {
        let state = self.inner.lock();
        let queued = state.runs.get(uid).map_or(0, |run| run.judging.len());
        self.inner.per_run.saturating_sub(queued)
    }

    /// Queues `judge`, the judging of attempt `attempt` of trial `trial_id` of `run` (uid `uid`).
    /// Does nothing when that review is already queued.
    pub fn submit<F>(&self, run: ObjectRef<EvaluationRun>, uid: &str, trial_id: &str, attempt: u32, judge: F)
    where
        F: Future<Output = Result<Rejudged, String>> + Send + 'static,
    {
        let key: ReviewKey = (trial_id.to_string(), attempt);
        // Held while spawning: the task reports back under the same lock, so it always finds
        // itself registered.
        let mut state = self.inner.lock();
        let reviews = state.runs.entry(uid.to_string()).or_default();
        if reviews.judging.contains_key(&key) {
            return;
        }
        let inner = self.inner.clone();
        let (task_uid, task_key) = (uid.to_string(), key.clone());
        let task = tokio::spawn(async move {
            // Closed by `drain`: a review not yet started is left for the next process.
            let Ok(_permit) = inner.permits.acquire().await else {
                inner.leave(&task_uid, &task_key, None);
                return;
            };
            let outcome = judge.await;
            inner.leave(&task_uid, &task_key, Some((outcome, run)));
        });
        reviews.judging.insert(key, task.abort_handle());
    }

    /// The reviews of run `uid` judged since the last call.
    pub fn take_finished(&self, uid: &str) -> Vec<Judged> {
        let mut state = self.inner.lock();
        state.runs.get_mut(uid).map(|run| std::mem::take(&mut run.finished)).unwrap_or_default()
    }

    /// Whether reviews of run `uid` are in the queue.
    pub fn is_busy(&self, uid: &str) -> bool {
        self.inner.lock().runs.get(uid).is_some_and(|run| !run.judging.is_empty())
    }

    /// Waits until no review of run `uid` is in the queue.
    pub async fn settled(&self, uid: &str) {
        self.wait_until(|state| state.runs.get(uid).is_none_or(|run| run.judging.is_empty())).await;
    }

    /// Drops run `uid`'s reviews, judged or not (the run was deleted).
    pub fn forget_run(&self, uid: &str) {
        let removed = self.inner.lock().runs.remove(uid);
        for task in removed.into_iter().flat_map(|run| run.judging.into_values()) {
            task.abort();
        }
        self.inner.left.notify_waiters();
    }

    /// Starts no more reviews and waits for those being judged to be stored.
    pub async fn drain(&self) {
        self.inner.permits.close();
        self.wait_until(|state| state.runs.values().all(|run| run.judging.is_empty())).await;
    }

    async fn wait_until(&self, done: impl Fn(&QueueState) -> bool) {
        loop {
            let left = self.inner.left.notified();
            let mut left = std::pin::pin!(left);
            // Registered before looking, so a review leaving in between is not missed.
            left.as_mut().enable();
            if done(&self.inner.lock()) {
                return;
            }
            left.await;
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().expect("judge queue lock")
    }

    /// A review leaves the queue: judged (`outcome`), or not started (`None`).
    fn leave(&self, uid: &str, key: &ReviewKey, outcome: Option<(Result<Rejudged, String>, ObjectRef<EvaluationRun>)>) {
        {
            let mut state = self.lock();
            // A forgotten run's reviews are dropped.
            let Some(run) = state.runs.get_mut(uid) else { return };
            if run.judging.remove(key).is_none() {
                return;
            }
            if let Some((outcome, object)) = outcome {
                run.finished.push(Judged { trial_id: key.0.clone(), attempt: key.1, outcome });
                if let Some(wake) = &state.wake {
                    let _ = wake.unbounded_send(object);
                }
            }
        }
        self.left.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    fn run_ref() -> ObjectRef<EvaluationRun> {
        ObjectRef::new("run").within("ns")
    }

    fn unjudged() -> Result<Rejudged, String> {
        Err("no judge here".to_string())
    }

    #[tokio::test]
    async fn a_judged_review_is_handed_back_once_and_wakes_its_run() {
        let queue = JudgeQueue::new(2, 8);
        let mut wakes = queue.wakes();
        queue.submit(run_ref(), "uid", "t1", 1, async { unjudged() });
        assert!(queue.is_queued("uid", "t1", 1));
        assert_eq!(queue.room("uid"), 7);
        assert_eq!(wakes.next().await, Some(run_ref()));
        queue.settled("uid").await;
        let judged = queue.take_finished("uid");
        assert_eq!(judged.len(), 1);
        assert_eq!((judged[0].trial_id.as_str(), judged[0].attempt), ("t1", 1));
        assert!(queue.take_finished("uid").is_empty(), "handed back once");
        assert!(!queue.is_queued("uid", "t1", 1));
        assert_eq!(queue.room("uid"), 8);
    }

    #[tokio::test]
    async fn a_review_already_queued_is_not_queued_twice() {
        let queue = JudgeQueue::new(1, 8);
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        queue.submit(run_ref(), "uid", "t1", 1, async move {
            let _ = released.await;
            unjudged()
        });
        queue.submit(run_ref(), "uid", "t1", 1, async { panic!("queued twice") });
        release.send(()).unwrap();
        queue.settled("uid").await;
        assert_eq!(queue.take_finished("uid").len(), 1);
    }

    #[tokio::test]
    async fn no_more_than_the_concurrency_are_judged_at_once() {
        let queue = JudgeQueue::new(2, 64);
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let most = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for i in 0..10 {
            let (running, most) = (running.clone(), most.clone());
            queue.submit(run_ref(), "uid", &format!("t{i}"), 1, async move {
                let now = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                most.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                unjudged()
            });
        }
        queue.settled("uid").await;
        assert_eq!(queue.take_finished("uid").len(), 10);
        assert_eq!(most.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_forgotten_run_hands_nothing_back() {
        let queue = JudgeQueue::new(1, 8);
        queue.submit(run_ref(), "uid", "t1", 1, async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            unjudged()
        });
        queue.forget_run("uid");
        assert!(!queue.is_busy("uid"));
        assert!(queue.take_finished("uid").is_empty());
        queue.drain().await;
    }

    #[tokio::test]
    async fn draining_finishes_what_is_being_judged_and_starts_nothing_more() {
        let queue = JudgeQueue::new(1, 8);
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for i in 0..3 {
            let started = started.clone();
            queue.submit(run_ref(), "uid", &format!("t{i}"), 1, async move {
                started.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                unjudged()
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        queue.drain().await;
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1, "only the review being judged finished");
        assert_eq!(queue.take_finished("uid").len(), 1);
        assert!(!queue.is_busy("uid"));
    }
}
