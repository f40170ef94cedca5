//! The labels and annotations on a run's trial Jobs, their pods and ConfigMaps, and the selectors
//! that find them.
//!
//! | key | value |
//! | --- | --- |
//! | `lightsout.dev/run` | the EvaluationRun's name (as a label value, see [`label_value`]) |
//! | `lightsout.dev/variant` | the variant id (16 hex digits) |
//! | `lightsout.dev/trial` | the trial id (16 hex digits) |
//! | `lightsout.dev/task` | the task id as a label value (see [`label_value`]) |
//! | `lightsout.dev/attempt` | the attempt number, 1-based |
//! | `lightsout.dev/context-config` | the trial's `matrix.contextConfigs` value (`config_A`…); only on that axis |
//! | `app.kubernetes.io/managed-by` | `lightsout` |
//! | `app.kubernetes.io/component` | `trial` |
//!
//! Task ids come from datasets and may hold characters a label value may not (`/`, `#`,
//! spaces…) or be longer than 63 characters. [`label_value`] keeps a value that is already a
//! valid label value unchanged and replaces any other by `h-` and 16 hex digits of its SHA-256;
//! nothing is rewritten character by character, so two different ids never share a label
//! value (short of a 64-bit hash collision). The real task id is always in the annotation
//! `lightsout.dev/task-id`. Run names longer than 63 characters (names may have up to 253) are
//! hashed the same way.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use lightsout_api::ContextConfig;
use sha2::{Digest, Sha256};

pub const RUN: &str = "lightsout.dev/run";
pub const VARIANT: &str = "lightsout.dev/variant";
pub const TRIAL: &str = "lightsout.dev/trial";
pub const TASK: &str = "lightsout.dev/task";
pub const ATTEMPT: &str = "lightsout.dev/attempt";
pub const CONTEXT_CONFIG: &str = "lightsout.dev/context-config";
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const COMPONENT: &str = "app.kubernetes.io/component";
/// Annotation: the task id exactly as the dataset spells it.
pub const TASK_ID_ANNOTATION: &str = "lightsout.dev/task-id";
/// Kueue's label naming the LocalQueue a Job is submitted to.
pub const KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";

pub const MANAGER: &str = "lightsout";
pub const TRIAL_COMPONENT: &str = "trial";

/// Whether `value` is a valid label value: at most 63 characters, empty or
/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`.
pub fn is_valid_label_value(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `raw` when it is a valid, non-empty label value; otherwise `h-` and the first 16 hex digits of
/// its SHA-256.
pub fn label_value(raw: &str) -> String {
    if !raw.is_empty() && is_valid_label_value(raw) {
        raw.to_string()
    } else {
        format!("h-{}", hex::encode(&Sha256::digest(raw.as_bytes())[..8]))
    }
}

/// What identifies one trial attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptIdentity<'a> {
    pub run: &'a str,
    pub variant_id: &'a str,
    pub trial_id: &'a str,
    pub task_id: &'a str,
    /// The trial's configuration of the `matrix.contextConfigs` axis.
    pub context: Option<ContextConfig>,
    pub attempt: u32,
}

/// The labels of a trial attempt's Job, pod and ConfigMap.
pub fn trial_labels(id: &AttemptIdentity) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (RUN.to_string(), label_value(id.run)),
        (VARIANT.to_string(), label_value(id.variant_id)),
        (TRIAL.to_string(), label_value(id.trial_id)),
        (TASK.to_string(), label_value(id.task_id)),
        (ATTEMPT.to_string(), id.attempt.to_string()),
        (MANAGED_BY.to_string(), MANAGER.to_string()),
        (COMPONENT.to_string(), TRIAL_COMPONENT.to_string()),
    ]);
    if let Some(context) = id.context {
        labels.insert(CONTEXT_CONFIG.to_string(), context.as_str().to_string());
    }
    labels
}

/// The annotations of a trial attempt's Job and pod.
pub fn trial_annotations(id: &AttemptIdentity) -> BTreeMap<String, String> {
    BTreeMap::from([(TASK_ID_ANNOTATION.to_string(), id.task_id.to_string())])
}

/// The labels every trial object of `run` carries, and that select them.
pub fn run_match_labels(run: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (RUN.to_string(), label_value(run)),
        (MANAGED_BY.to_string(), MANAGER.to_string()),
        (COMPONENT.to_string(), TRIAL_COMPONENT.to_string()),
    ])
}

/// Selects all trial Jobs (and pods) of `run`.
pub fn run_selector(run: &str) -> LabelSelector {
    LabelSelector { match_labels: Some(run_match_labels(run)), match_expressions: None }
}

/// [`run_selector`] as a list call's `labelSelector` string: `k=v,k=v`.
pub fn run_selector_string(run: &str) -> String {
    run_match_labels(run).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_values_are_kept_and_others_hashed() {
        assert_eq!(label_value("crbugbench-0042"), "crbugbench-0042");
        assert_eq!(label_value("a.b_c-D9"), "a.b_c-D9");
        let long = "x".repeat(64);
        for raw in ["owner/repo#12", "-leading", "trailing.", "has space", "", long.as_str(), "ünï"] {
            let value = label_value(raw);
            assert!(value.starts_with("h-") && value.len() == 18, "{raw:?} -> {value}");
            assert!(is_valid_label_value(&value));
        }
        assert!(is_valid_label_value(&"y".repeat(63)));
        assert_eq!(label_value(&"y".repeat(63)), "y".repeat(63));
        // Deterministic, and different ids stay different.
        assert_eq!(label_value("owner/repo#12"), label_value("owner/repo#12"));
        assert_ne!(label_value("owner/repo#12"), label_value("owner/repo#13"));
        assert_ne!(label_value("a/b"), label_value("a-b"));
    }

    #[test]
    fn trial_labels_carry_every_key_and_the_real_task_id_goes_in_an_annotation() {
        let id = AttemptIdentity {
            run: "demo",
            variant_id: "0123456789abcdef",
            trial_id: "fedcba9876543210",
            task_id: "django/django#17000",
            context: None,
            attempt: 3,
        };
        let labels = trial_labels(&id);
        assert_eq!(labels[RUN], "demo");
        assert_eq!(labels[VARIANT], "0123456789abcdef");
        assert_eq!(labels[TRIAL], "fedcba9876543210");
        assert_eq!(labels[TASK], label_value("django/django#17000"));
        assert!(labels[TASK].starts_with("h-"));
        assert_eq!(labels[ATTEMPT], "3");
        assert_eq!(labels[MANAGED_BY], "lightsout");
        assert_eq!(labels[COMPONENT], "trial");
        assert!(labels.values().all(|v| is_valid_label_value(v)));
        assert_eq!(trial_annotations(&id)[TASK_ID_ANNOTATION], "django/django#17000");
        // The run selector matches every trial object of the run.
        assert!(run_match_labels("demo").iter().all(|(k, v)| labels.get(k) == Some(v)));
        assert!(!labels.contains_key(CONTEXT_CONFIG), "only trials of the context axis name a configuration");
        let in_context = trial_labels(&AttemptIdentity { context: Some(ContextConfig::ConfigC), ..id });
        assert_eq!(in_context[CONTEXT_CONFIG], "config_C");
        assert!(is_valid_label_value(&in_context[CONTEXT_CONFIG]));
    }

    #[test]
    fn the_run_selector_string_lists_the_run_and_manager() {
        assert_eq!(
            run_selector_string("demo"),
            "app.kubernetes.io/component=trial,app.kubernetes.io/managed-by=lightsout,lightsout.dev/run=demo"
        );
        let long = format!("run-{}", "a".repeat(70));
        assert!(run_selector_string(&long).contains(&format!("lightsout.dev/run={}", label_value(&long))));
        assert_eq!(run_selector("demo").match_labels.unwrap(), run_match_labels("demo"));
    }
}
