//! Whether Kueue can ever admit a run's trial Jobs, read from the Workload Kueue keeps for one
//! of them (`spec.queueName` runs). Waiting for quota is normal and says nothing; a Workload that
//! cannot be admitted as things stand — its request exceeds what the ClusterQueue could ever give
//! it, borrowing included, or its LocalQueue or ClusterQueue is missing or inactive — would leave
//! the run's Jobs suspended forever. The reconciler shows that as `Progressing=False`, reason
//! `QueueInadmissible`, with Kueue's own message, instead of silent waiting.
//!
//! Every trial Job of a run asks for the same resources (`spec.agent.resources`), so the
//! Workload of the run's longest-waiting Job speaks for all of them: one read per reconcile,
//! made only while Jobs are queued.
//!
//! Kueue (v0.11) says this in the Workload's `QuotaReserved` condition: `False` with reason
//! `Inadmissible` (its queues), or with reason `Pending` and a message naming a request above the
//! "maximum capacity" (the flavor assigner's no-fit). Kueue gives no structured field for the
//! latter, so its wording is matched, and a Kueue that words it otherwise leaves the run waiting
//! as before.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The Workload label that names the Job it was made for (by uid).
pub const JOB_UID_LABEL: &str = "kueue.x-k8s.io/job-uid";

/// Kueue's words for a request no quota could ever hold.
const NEVER_FITS: &str = "request > maximum capacity";

/// Why Kueue cannot admit the Workload whose `status.conditions` these are, if it cannot.
pub fn blocked_reason(conditions: &[Condition]) -> Option<String> {
    let reserved = conditions.iter().find(|c| c.type_ == "QuotaReserved")?;
    let blocked = reserved.status == "False"
        && (reserved.reason == "Inadmissible"
            || (reserved.reason == "Pending" && reserved.message.contains(NEVER_FITS)));
    blocked.then(|| reserved.message.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserved(status: &str, reason: &str, message: &str) -> Vec<Condition> {
        vec![serde_json::from_value(serde_json::json!({
            "type": "QuotaReserved", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-02T20:00:00Z",
        }))
        .unwrap()]
    }

    #[test]
    fn only_what_cannot_be_admitted_as_things_stand_blocks() {
        let never = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, request > maximum capacity (3 > 2)";
        assert_eq!(blocked_reason(&reserved("False", "Pending", never)).as_deref(), Some(never));
        let gone = "LocalQueue queue doesn't exist";
        assert_eq!(blocked_reason(&reserved("False", "Inadmissible", gone)).as_deref(), Some(gone));
        // Waiting for quota others hold, being admitted, or no verdict yet: not blocked.
        let busy = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed";
        assert_eq!(blocked_reason(&reserved("False", "Pending", busy)), None);
        assert_eq!(blocked_reason(&reserved("True", "QuotaReserved", "Quota reserved in ClusterQueue cq")), None);
        assert_eq!(blocked_reason(&[]), None);
    }
}
