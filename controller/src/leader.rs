//! Leader election with a `coordination.k8s.io/v1` Lease, so that of several replicas exactly
//! one reconciles (and writes) at a time.
//!
//! The protocol is client-go's: the holder renews `renewTime` every [`LeaseSettings::renew_every`];
//! another replica takes the Lease over only when `renewTime + leaseDurationSeconds` has passed.
//! Every write is a replace carrying the `resourceVersion` that was read, so of two replicas that
//! race for the same Lease, the API server lets one win and answers the other `409 Conflict`.
//! A leader that cannot renew for [`LeaseSettings::give_up_after`] (shorter than the lease
//! duration) stops before anyone else may take over: two replicas never both write.

use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;

#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This replica (its pod name).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
    /// A leader whose renewals keep failing this long stops leading.
    pub give_up_after: Duration,
}

impl LeaseSettings {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaseSettings {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            give_up_after: Duration::from_secs(10),
        }
    }
}

pub struct LeaderLease {
    api: Api<Lease>,
    settings: LeaseSettings,
}

fn micro_time(at: DateTime<Utc>) -> MicroTime {
    MicroTime(Timestamp::from_microsecond(at.timestamp_micros()).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn to_chrono(time: &MicroTime) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(time.0.as_microsecond()).unwrap_or_default()
}

impl LeaderLease {
    pub fn new(client: Client, settings: LeaseSettings) -> Self {
        LeaderLease { api: Api::namespaced(client, &settings.namespace), settings }
    }

    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Acquires the Lease, renews it if this replica holds it, or takes it over if it expired.
    /// `Ok(true)` when this replica holds it afterwards.
    pub async fn try_acquire(&self, now: DateTime<Utc>) -> Result<bool, kube::Error> {
        let me = &self.settings.identity;
        let duration = i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(self.settings.name.clone()), ..ObjectMeta::default() },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.clone()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(micro_time(now)),
                    renew_time: Some(micro_time(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return conflict_is_false(self.api.create(&PostParams::default(), &lease).await);
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if holder.as_deref() == Some(me.as_str()) {
            spec.renew_time = Some(micro_time(now));
            spec.lease_duration_seconds = Some(duration);
        } else {
            let held_for = i64::from(spec.lease_duration_seconds.unwrap_or(duration));
            let expired = match &spec.renew_time {
                Some(renewed) => to_chrono(renewed) + chrono::TimeDelta::seconds(held_for) < now,
                None => true,
            };
            if holder.is_some() && !expired {
                return Ok(false);
            }
            spec.holder_identity = Some(me.clone());
            spec.acquire_time = Some(micro_time(now));
            spec.renew_time = Some(micro_time(now));
            spec.lease_duration_seconds = Some(duration);
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        conflict_is_false(self.api.replace(&self.settings.name, &PostParams::default(), &lease).await)
    }

    /// Gives the Lease up (on shutdown) so another replica need not wait for it to expire.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else { return Ok(()) };
        let Some(spec) = lease.spec.as_mut() else { return Ok(()) };
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = None;
        conflict_is_false(self.api.replace(&self.settings.name, &PostParams::default(), &lease).await).map(|_| ())
    }
}

fn conflict_is_false<T>(result: Result<T, kube::Error>) -> Result<bool, kube::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
