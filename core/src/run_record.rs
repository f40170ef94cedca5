//! `runs/<run>/run.json`: what a results location holds — the run's name, its spec with the
//! spec's hash, and the variants the spec expands to. Whoever runs the trials writes it when it
//! claims the location, with [`record_run`]: `lightsout run` and the controller alike, so a
//! run's results read the same whoever made them. `lightsout compare` and `lightsout report`
//! read it (`lightsout_report::compare::load_run`): the variants pair trials across runs, and
//! `spec.retries` says when a trial's last attempt is final.

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::results::{ResultStore, RunLayout};
use lightsout_api::validate::spec_hash;
use lightsout_api::variant::{self, Variant};
use lightsout_api::EvaluationRunSpec;

/// The content of `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub name: String,
    /// [`spec_hash`] of `spec`.
    pub spec_hash: String,
    #[serde(default)]
    pub spec: serde_json::Value,
    pub variants: Vec<Variant>,
}

impl RunRecord {
    /// The record of the run `name` with this spec.
    pub fn new(name: &str, spec: &EvaluationRunSpec) -> RunRecord {
        RunRecord {
            name: name.to_string(),
            spec_hash: spec_hash(spec),
            spec: serde_json::to_value(spec).expect("a spec serialises"),
            variants: variant::variants(spec),
        }
    }
}

/// What [`record_run`] does with a `run.json` that records another spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherSpec {
    /// Refuse the location: it holds the results of another run (`lightsout run`: a changed spec
    /// needs a new name or another results location).
    Refuse,
    /// Record this spec instead: the caller has already established that the stored results are
    /// of the same trials (the controller's `controller.json` claim), so only fields that do not
    /// define them changed (`parallelism`, `retries`, `budget`, …).
    Replace,
}

/// Writes `runs/<run>/run.json` for `spec` unless the one there records the same spec (same
/// [`spec_hash`]); one recording another spec is refused or replaced as `other` says.
/// Idempotent, so a process that dies before or after writing it just calls it again.
pub async fn record_run<S: ResultStore>(
    store: &S,
    layout: &RunLayout,
    spec: &EvaluationRunSpec,
    other: OtherSpec,
) -> anyhow::Result<()> {
    let record = RunRecord::new(&layout.run, spec);
    let key = layout.run_json();
    if let Some(existing) = read_run_record(store, layout).await? {
        if existing.spec_hash == record.spec_hash {
            return Ok(());
        }
        if other == OtherSpec::Refuse {
            bail!(
                "{} holds results of run {:?} made with a different spec (hash {} ≠ {}): \
                 give the run a new metadata.name, or use another --results location",
                store.uri(&layout.run_dir()),
                existing.name,
                existing.spec_hash.get(..12).unwrap_or(&existing.spec_hash),
                &record.spec_hash[..12]
            );
        }
    }
    let bytes = serde_json::to_vec_pretty(&record).expect("a run record serialises");
    store.put(&key, &bytes).await.with_context(|| format!("writing {}", store.uri(&key)))
}

/// The run's `run.json`; `None` when there is none.
pub async fn read_run_record<S: ResultStore>(store: &S, layout: &RunLayout) -> anyhow::Result<Option<RunRecord>> {
    let key = layout.run_json();
    let Some(bytes) = store.get(&key).await.with_context(|| format!("reading {}", store.uri(&key)))? else {
        return Ok(None);
    };
    let record =
        serde_json::from_slice(&bytes).with_context(|| format!("{} is not a valid run.json", store.uri(&key)))?;
    Ok(Some(record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::LocalStore;

    fn spec(parallelism: i32) -> EvaluationRunSpec {
        let yaml = format!(
            r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {{name: r}}
spec:
  dataset: {{format: crbugbench, source: "file://tasks.jsonl"}}
  agent: {{harness: {{name: single-shot, version: "1.0.0"}}, timeout: 30s}}
  matrix: {{models: [{{name: gpt-5-mini, provider: openai}}], reasoningEfforts: [low, high]}}
  providers: {{openai: {{baseUrl: "http://models:8000/v1", apiKind: openai-chat}}}}
  storage: {{results: "file://results"}}
  parallelism: {parallelism}
"#
        );
        lightsout_api::validate::parse_run(&yaml, "run.yaml").unwrap().spec
    }

    #[tokio::test]
    async fn written_once_refused_or_replaced_for_another_spec() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path());
        let layout = RunLayout::new("r");
        record_run(&store, &layout, &spec(2), OtherSpec::Refuse).await.unwrap();
        let written = read_run_record(&store, &layout).await.unwrap().unwrap();
        assert_eq!(written, RunRecord::new("r", &spec(2)));
        assert_eq!(written.variants.len(), 2);
        assert_eq!(written.spec["parallelism"], 2);
        // Again with the same spec: nothing changes.
        let before = std::fs::metadata(dir.path().join("runs/r/run.json")).unwrap().modified().unwrap();
        record_run(&store, &layout, &spec(2), OtherSpec::Refuse).await.unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("runs/r/run.json")).unwrap().modified().unwrap(), before);

        let refused = record_run(&store, &layout, &spec(4), OtherSpec::Refuse).await.unwrap_err().to_string();
        assert!(refused.contains("made with a different spec"), "{refused}");
        assert_eq!(read_run_record(&store, &layout).await.unwrap().unwrap(), written, "kept");

        record_run(&store, &layout, &spec(4), OtherSpec::Replace).await.unwrap();
        assert_eq!(read_run_record(&store, &layout).await.unwrap().unwrap(), RunRecord::new("r", &spec(4)));
        assert_eq!(read_run_record(&store, &RunLayout::new("none")).await.unwrap(), None);
    }
}
