//! How a leading replica runs and stops: bounded, so the process always exits.
//!
//! kube-runtime's Controllers stop gracefully on a signal: no reconcile starts, those in flight
//! finish. But first they wait for every watch's first list, with no deadline: a watch that never
//! becomes ready (its CRD is not installed, the API server does not answer) holds the shutdown
//! forever — and the Lease with it, were it renewed until the Controllers return. So [`lead`]:
//!
//! 1. renews the Lease every `renew_every` while the controllers run, and starts the shutdown
//!    itself when it cannot: the Lease went to another replica, or renewals failed for
//!    `give_up_after`;
//! 2. stops renewing the moment the shutdown starts (SIGTERM, or the above): a replica on its
//!    way out keeps the Lease no longer than it may still write;
//! 3. gives the controllers until the deadline: `timeout` after the shutdown started, but never
//!    later than `give_up_after` after the last renewal, when the Lease may soon expire and be
//!    taken (and at once when another replica already holds it): two replicas never both write;
//! 4. drops whatever still runs then, cancelling the reconciles in flight — each is restart-safe,
//!    the next leader redoes what one did not finish;
//! 5. releases the Lease, so a standby takes over at once rather than when it expires.

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::leader::LeaderLease;

/// Why leading stopped without a signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lost {
    /// Another replica holds the Lease: stop writing at once.
    ToAnother,
    /// Renewals kept failing: the Lease may expire any moment.
    GaveUp,
}

/// Runs `controllers` while this replica holds `lease` (just acquired), until they return or
/// the shutdown ends them (see the module docs). `stop` is the process's shutdown signal: `true`
/// once SIGTERM arrived, and set here when the Lease is lost (`controllers` should stop
/// gracefully on it). `timeout` bounds the graceful stop. The Lease is released either way.
/// Returns what `controllers` returned, or `None` when they were abandoned at the deadline.
pub async fn lead<T>(
    lease: &LeaderLease,
    controllers: impl Future<Output = T>,
    stop: &watch::Sender<bool>,
    timeout: Duration,
) -> Option<T> {
    let settings = lease.settings().clone();
    let last_renewed = Mutex::new(Instant::now());
    let mut controllers = pin!(controllers);
    let mut stopping = stop.subscribe();
    let deadline = tokio::select! {
        result = &mut controllers => {
            release(lease).await;
            return Some(result);
        }
        _ = stopping.wait_for(|stop| *stop) => {
            tracing::info!(timeout = ?timeout, "shutting down: the leader Lease is no longer renewed");
            let renewed = *last_renewed.lock().expect("last renewal");
            let lease_safe_until = renewed + settings.give_up_after;
            Instant::now().checked_add(timeout).map_or(lease_safe_until, |t| t.min(lease_safe_until))
        }
        lost = keep_renewing(lease, &last_renewed) => {
            let _ = stop.send(true);
            match lost {
                Lost::ToAnother => Instant::now(),
                Lost::GaveUp => *last_renewed.lock().expect("last renewal") + settings.give_up_after,
            }
        }
    };
    let result = tokio::time::timeout_at(deadline, controllers).await.ok();
    if result.is_none() {
        tracing::warn!("the controllers did not stop in time: reconciles still running are cancelled");
    }
    release(lease).await;
    result
}

/// Renews the Lease every `renew_every` until leading must stop; says why. A renewal that does
/// not answer within `renew_every` counts as failed.
async fn keep_renewing(lease: &LeaderLease, last_renewed: &Mutex<Instant>) -> Lost {
    let settings = lease.settings();
    loop {
        tokio::time::sleep(settings.renew_every).await;
        let renewal = tokio::time::timeout(settings.renew_every, lease.try_acquire(chrono::Utc::now())).await;
        let error = match renewal {
            Ok(Ok(true)) => {
                *last_renewed.lock().expect("last renewal") = Instant::now();
                continue;
            }
            Ok(Ok(false)) => {
                tracing::error!("lost the leader Lease to another replica: stopping");
                return Lost::ToAnother;
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {:?}", settings.renew_every),
        };
        tracing::warn!(error, "could not renew the leader Lease");
        if last_renewed.lock().expect("last renewal").elapsed() >= settings.give_up_after {
            tracing::error!("could not renew the leader Lease in time: stopping");
            return Lost::GaveUp;
        }
    }
}

/// Gives the Lease up (no-op when another replica holds it), waiting at most `renew_every`.
async fn release(lease: &LeaderLease) {
    match tokio::time::timeout(lease.settings().renew_every, lease.release()).await {
        Ok(Ok(())) => tracing::info!("released the leader Lease"),
        Ok(Err(e)) => tracing::warn!(error = %e, "could not release the leader Lease"),
        Err(_) => tracing::warn!("could not release the leader Lease: the API did not answer"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, PostParams};
    use kube_fake_client::ClientBuilder;

    use super::*;
    use crate::leader::LeaseSettings;

    const NAMESPACE: &str = "lightsout-system";
    const NAME: &str = "lightsout-controller";

    /// A Lease held by this replica (`me`), over the fake API server.
    async fn held_lease() -> (LeaderLease, Api<Lease>) {
        let client = ClientBuilder::new().build().await.unwrap();
        let lease = LeaderLease::new(client.clone(), LeaseSettings::new(NAMESPACE, NAME, "me"));
        assert!(lease.try_acquire(chrono::Utc::now()).await.unwrap());
        (lease, Api::namespaced(client, NAMESPACE))
    }

    async fn holder(api: &Api<Lease>) -> Option<String> {
        api.get(NAME).await.unwrap().spec.unwrap().holder_identity
    }

    async fn version(api: &Api<Lease>) -> String {
        api.get(NAME).await.unwrap().metadata.resource_version.unwrap()
    }

    /// SIGTERM after `after`.
    async fn sigterm(stop: &watch::Sender<bool>, after: Duration) {
        tokio::time::sleep(after).await;
        stop.send(true).unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn controllers_that_never_become_ready_are_abandoned_at_the_deadline_and_the_lease_released() {
        let (lease, api) = held_lease().await;
        let (stop, _rx) = watch::channel(false);
        let started = Instant::now();
        // A Controller waiting for a watch that never lists: it never returns, signal or not.
        let never_ready = std::future::pending::<()>();
        let (result, ()) = tokio::join!(
            lead(&lease, never_ready, &stop, Duration::from_secs(3)),
            sigterm(&stop, Duration::from_secs(1))
        );
        assert_eq!(result, None, "abandoned");
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(4) && took < Duration::from_millis(4100), "{took:?}");
        assert_eq!(holder(&api).await, None, "released");
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_stop_when_the_shutdown_starts_and_the_deadline_never_outlives_the_lease() {
        let (lease, api) = held_lease().await;
        let (stop, rx) = watch::channel(false);
        let started = Instant::now();
        let versions = Arc::new(Mutex::new(Vec::new()));
        // Renewed at 5 s; SIGTERM at 7 s. The controllers note the Lease's version at the signal
        // and 7 s later, then hang: a long timeout must not keep them past 5 s + give_up_after.
        let controllers = {
            let (api, versions, mut rx) = (api.clone(), versions.clone(), rx.clone());
            async move {
                let at_start = version(&api).await;
                rx.wait_for(|stop| *stop).await.unwrap();
                let at_signal = version(&api).await;
                tokio::time::sleep(Duration::from_secs(7)).await;
                let later = version(&api).await;
                versions.lock().unwrap().extend([at_start, at_signal, later]);
                std::future::pending::<()>().await
            }
        };
        let (result, ()) = tokio::join!(
            lead(&lease, controllers, &stop, Duration::from_secs(60)),
            sigterm(&stop, Duration::from_secs(7))
        );
        assert_eq!(result, None);
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(15) && took < Duration::from_millis(15_100), "{took:?}");
        let versions = versions.lock().unwrap().clone();
        assert_eq!(versions.len(), 3);
        assert_ne!(versions[0], versions[1], "renewed while leading");
        assert_eq!(versions[1], versions[2], "not renewed once the shutdown started");
        assert_eq!(holder(&api).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn controllers_that_stop_in_time_return_their_result_and_the_lease_is_released() {
        let (lease, api) = held_lease().await;
        let (stop, rx) = watch::channel(false);
        let controllers = {
            let mut rx = rx.clone();
            async move {
                rx.wait_for(|stop| *stop).await.unwrap();
                tokio::time::sleep(Duration::from_secs(2)).await;
                "drained"
            }
        };
        let started = Instant::now();
        let (result, ()) = tokio::join!(
            lead(&lease, controllers, &stop, Duration::from_secs(8)),
            sigterm(&stop, Duration::from_secs(1))
        );
        assert_eq!(result, Some("drained"));
        assert!(started.elapsed() < Duration::from_millis(3100), "{:?}", started.elapsed());
        assert_eq!(holder(&api).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_taken_by_another_replica_stops_the_controllers_at_once() {
        let (lease, api) = held_lease().await;
        let (stop, rx) = watch::channel(false);
        // Another replica holds the Lease (this one was paused past its expiry, say).
        let mut taken = api.get(NAME).await.unwrap();
        taken.spec.as_mut().unwrap().holder_identity = Some("other".into());
        api.replace(NAME, &PostParams::default(), &taken).await.unwrap();

        let started = Instant::now();
        let result = lead(&lease, std::future::pending::<()>(), &stop, Duration::from_secs(30)).await;
        assert_eq!(result, None);
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(5) && took < Duration::from_millis(5100), "at the first renewal: {took:?}");
        assert!(*rx.borrow(), "the shutdown signal is set for the controllers");
        assert_eq!(holder(&api).await.as_deref(), Some("other"), "another's Lease is left alone");
    }
}
