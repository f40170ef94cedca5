//! Kueue's admission webhooks, from its own `config/components/webhook/manifests.yaml`, pointed
//! at a manager on loopback: each webhook's `clientConfig.service` becomes
//! `url: https://127.0.0.1:<port><path>` with the CA that signed the manager's serving
//! certificate, so the API server calls the local process directly.

use anyhow::{bail, Context as _};
use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::Value;

/// The API groups whose webhooks are kept: Kueue's own objects and the one integration the test
/// manager enables (`batch/job`). The webhooks of the others (Pods, Deployments, StatefulSets,
/// …) would send every such object of the cluster to the manager, failing them (failure policy
/// `Fail`) whenever it is not running.
const KEPT_GROUPS: [&str; 2] = ["kueue.x-k8s.io", "batch"];

/// The webhook configurations of `manifests_yaml`, renamed after `name_prefix`, reduced to
/// [`KEPT_GROUPS`], calling `https://127.0.0.1:{port}`, trusting `ca_pem`. `(kind, object)`
/// pairs: `MutatingWebhookConfiguration` or `ValidatingWebhookConfiguration`.
pub fn loopback_configurations(
    manifests_yaml: &str,
    name_prefix: &str,
    port: u16,
    ca_pem: &str,
) -> anyhow::Result<Vec<(String, Value)>> {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let mut configurations = Vec::new();
    for document in serde_yaml::Deserializer::from_str(manifests_yaml) {
        let mut object = Value::deserialize(document).context("parsing Kueue's webhook manifests")?;
        if object.is_null() {
            continue;
        }
        let kind = object["kind"].as_str().context("a webhook manifest without kind")?.to_string();
        let original = object["metadata"]["name"].as_str().unwrap_or("webhook-configuration").to_string();
        object["metadata"] = serde_json::json!({"name": format!("{name_prefix}-{original}")});
        let Some(webhooks) = object["webhooks"].as_array_mut() else {
            bail!("{kind} {original} in Kueue's webhook manifests has no webhooks");
        };
        webhooks.retain(|webhook| {
            webhook["rules"].as_array().is_some_and(|rules| {
                rules.iter().any(|rule| {
                    rule["apiGroups"].as_array().is_some_and(|groups| {
                        groups.iter().any(|group| KEPT_GROUPS.contains(&group.as_str().unwrap_or_default()))
                    })
                })
            })
        });
        for webhook in webhooks.iter_mut() {
            let name = webhook["name"].as_str().unwrap_or_default().to_string();
            let path = webhook["clientConfig"]["service"]["path"]
                .as_str()
                .with_context(|| format!("webhook {name} in {kind} {original} has no service path"))?
                .to_string();
            webhook["clientConfig"] =
                serde_json::json!({"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca_bundle});
        }
        configurations.push((kind, object));
    }
    Ok(configurations)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFESTS: &str = r#"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  failurePolicy: Fail
  name: mpod.kb.io
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  sideEffects: None
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}
  failurePolicy: Fail
  name: mjob.kb.io
  rules:
  - {apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-kueue-x-k8s-io-v1beta1-clusterqueue}
  failurePolicy: Fail
  name: vclusterqueue.kb.io
  rules:
  - {apiGroups: [kueue.x-k8s.io], apiVersions: [v1beta1], operations: [CREATE, UPDATE], resources: [clusterqueues]}
  sideEffects: None
"#;

    #[test]
    fn webhooks_call_loopback_with_the_ca_and_only_kueue_and_jobs_are_kept() {
        let configurations = loopback_configurations(MANIFESTS, "kueue", 9443, "CA").unwrap();
        let kinds: Vec<&str> = configurations.iter().map(|(kind, _)| kind.as_str()).collect();
        assert_eq!(kinds, ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]);
        let mutating = &configurations[0].1;
        assert_eq!(mutating["metadata"]["name"], "kueue-mutating-webhook-configuration");
        let webhooks = mutating["webhooks"].as_array().unwrap();
        assert_eq!(webhooks.len(), 1, "the Pod webhook is dropped: {webhooks:?}");
        assert_eq!(webhooks[0]["name"], "mjob.kb.io");
        assert_eq!(webhooks[0]["clientConfig"]["url"], "https://127.0.0.1:9443/mutate-batch-v1-job");
        assert_eq!(webhooks[0]["clientConfig"]["caBundle"], "Q0E=");
        assert!(webhooks[0]["clientConfig"].get("service").is_none());
        let validating = &configurations[1].1["webhooks"][0];
        assert_eq!(
            validating["clientConfig"]["url"],
            "https://127.0.0.1:9443/validate-kueue-x-k8s-io-v1beta1-clusterqueue"
        );
    }
}
