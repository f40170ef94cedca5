//! Deleting a run: the finalizer removes what the run created in the cluster — its Jobs (with
//! their pods), the trials' ConfigMaps and its NetworkPolicy — and leaves its results in the
//! results store. The controller creates no per-run Secret (provider keys and S3 credentials
//! are the user's Secrets, referenced by the Jobs), so there is none to delete. Owner references
//! would let the garbage collector do most of this; the finalizer makes it immediate, covers a
//! ConfigMap orphaned by a crash, and drops the run's metrics and cached state.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use lightsout_api::EvaluationRun;

use crate::context::Context;
use crate::error::{gone_is_ok, Error};
use crate::labels;
use crate::metrics::RunKey;
use crate::network::network_policy_name;

/// The finalizer that lets the controller clean up what a run created.
pub const FINALIZER: &str = "lightsout.dev/cleanup";

/// Cleans up a run being deleted, then removes the finalizer.
pub async fn cleanup(run: &EvaluationRun, ctx: &Context) -> Result<Action, Error> {
    let namespace = run.metadata.namespace.clone().ok_or(Error::Metadata("metadata.namespace is missing"))?;
    let name = run.metadata.name.clone().ok_or(Error::Metadata("metadata.name is missing"))?;
    let finalizers = run.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let params = ListParams::default().labels(&labels::run_selector_string(&name));
    let jobs = Api::<Job>::namespaced(ctx.client.clone(), &namespace);
    for job in jobs.list(&params).await?.items {
        delete_ignoring_missing(&jobs, job.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    let config_maps = Api::<ConfigMap>::namespaced(ctx.client.clone(), &namespace);
    for config_map in config_maps.list(&params).await?.items {
        delete_ignoring_missing(&config_maps, config_map.metadata.name.as_deref().unwrap_or_default()).await?;
    }
    let policies = Api::<NetworkPolicy>::namespaced(ctx.client.clone(), &namespace);
    delete_ignoring_missing(&policies, &network_policy_name(&name)).await?;

    ctx.metrics.forget_run(&RunKey { namespace: namespace.clone(), run: name.clone() });
    if let Some(uid) = run.metadata.uid.as_deref() {
        ctx.forget_run(uid);
    }

    // Remove only our finalizer, and only from the list we read (the test fails on a race).
    let remaining: Vec<&String> = finalizers.iter().filter(|f| *f != FINALIZER).collect();
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/metadata/finalizers", "value": finalizers},
        {"op": "replace", "path": "/metadata/finalizers", "value": remaining},
    ]))
    .expect("a valid JSON patch");
    let runs = Api::<EvaluationRun>::namespaced(ctx.client.clone(), &namespace);
    gone_is_ok(runs.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch)).await)?;
    tracing::info!(
        namespace,
        run = name,
        "run deleted: its Jobs, ConfigMaps and NetworkPolicy are removed; results stay in the store"
    );
    Ok(Action::await_change())
}

async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    gone_is_ok(api.delete(name, &DeleteParams::background()).await)
}
