//! Leader election against the fake API server: one holder at a time, takeover only after the
//! Lease expires, and release on shutdown.

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_fake_client::ClientBuilder;
use lightsout_controller::leader::{LeaderLease, LeaseSettings};

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-12-01T08:00:00Z").unwrap().to_utc() + TimeDelta::seconds(seconds)
}

#[tokio::test]
async fn one_replica_leads_until_its_lease_expires_or_it_releases_it() {
    let client = ClientBuilder::new().build().await.unwrap();
    let a = LeaderLease::new(client.clone(), LeaseSettings::new("lightsout-system", "lightsout-controller", "a"));
    let b = LeaderLease::new(client.clone(), LeaseSettings::new("lightsout-system", "lightsout-controller", "b"));

    assert!(a.try_acquire(at(0)).await.unwrap(), "the first replica takes the free Lease");
    assert!(!b.try_acquire(at(1)).await.unwrap(), "the other waits while it is held");
    assert!(a.try_acquire(at(5)).await.unwrap(), "the holder renews");
    assert!(!b.try_acquire(at(19)).await.unwrap(), "renewed at 5 s for 15 s: still held at 19 s");

    // The holder stops renewing (killed): after the lease duration the other takes over.
    assert!(b.try_acquire(at(21)).await.unwrap());
    let lease = Api::<Lease>::namespaced(client.clone(), "lightsout-system").get("lightsout-controller").await.unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));
    assert!(!a.try_acquire(at(22)).await.unwrap(), "the old holder does not get it back");

    // Releasing hands it over at once.
    b.release().await.unwrap();
    assert!(a.try_acquire(at(23)).await.unwrap());
    // Releasing a Lease one does not hold changes nothing.
    b.release().await.unwrap();
    assert!(!b.try_acquire(at(24)).await.unwrap());
}

#[tokio::test]
async fn of_two_replicas_racing_for_an_expired_lease_exactly_one_wins() {
    let client = ClientBuilder::new().build().await.unwrap();
    let old = LeaderLease::new(client.clone(), LeaseSettings::new("ns", "lease", "old"));
    assert!(old.try_acquire(at(0)).await.unwrap());
    let contenders: Vec<LeaderLease> =
        (0..8).map(|i| LeaderLease::new(client.clone(), LeaseSettings::new("ns", "lease", format!("r{i}")))).collect();
    let attempts = contenders.iter().map(|c| c.try_acquire(at(60)));
    let won: Vec<bool> = futures::future::join_all(attempts).await.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(won.iter().filter(|w| **w).count(), 1, "{won:?}");
}
