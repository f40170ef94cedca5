//! Reading and checking a run file before anything runs.
//!
//! The CLI applies the same rules the API server applies at `kubectl apply`: the CRD's OpenAPI
//! types (through typed deserialisation), its CEL rules (evaluated client-side with the very
//! rules derived from [`crate::api`]), and Kubernetes' strict field validation (unknown fields
//! are errors). Every problem names the field it is about.

use std::fmt;

use kube::core::crd::CustomResourceExt;
use serde::Serialize;

use crate::api::{EvaluationRun, EvaluationRunSpec};
use crate::hash;

/// One problem with a run file, located by its field path (`spec.matrix.models`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// Every problem found in one run file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors {
    pub origin: String,
    pub errors: Vec<FieldError>,
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is not a valid EvaluationRun:", self.origin)?;
        for error in &self.errors {
            write!(f, "\n  - {error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

/// Parses and validates a run file's text. `origin` names the file in messages.
pub fn parse_run(text: &str, origin: &str) -> Result<EvaluationRun, SpecErrors> {
    let fail = |errors: Vec<FieldError>| SpecErrors { origin: origin.to_string(), errors };
    let value: serde_json::Value = serde_yaml::from_str(text).map_err(|e| {
        let location = e.location().map(|l| format!("line {}, column {}", l.line(), l.column())).unwrap_or_default();
        fail(vec![FieldError { field: location, message: format!("not valid YAML: {e}") }])
    })?;
    check_kind(&value).map_err(|e| fail(vec![e]))?;

    let mut unknown = Vec::new();
    // serde_ignored writes `?` for Option layers; users think of `spec.agent.harness.flavour`.
    let mut record_unknown = |path: serde_ignored::Path| unknown.push(path.to_string().replace(".?", ""));
    let deserializer = serde_ignored::Deserializer::new(&value, &mut record_unknown);
    let run: EvaluationRun = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        fail(vec![FieldError {
            field: if field == "." { String::new() } else { field },
            message: e.into_inner().to_string(),
        }])
    })?;

    let mut errors: Vec<FieldError> = unknown
        .into_iter()
        // Status is written by the controller; a file that carries one (e.g. from `kubectl get -o yaml`) is fine.
        .filter(|path| !path.starts_with("status"))
        // Checked by check_kind; the derived type does not store them.
        .filter(|path| path != "apiVersion" && path != "kind")
        .map(|path| FieldError { field: path, message: "unknown field".to_string() })
        .collect();
    errors.extend(check_rules(&run));
    if errors.is_empty() {
        Ok(run)
    } else {
        Err(fail(errors))
    }
}

fn check_kind(value: &serde_json::Value) -> Result<(), FieldError> {
    let api_version = EvaluationRun::api_resource().api_version;
    let field = |name: &str| value.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    if field("apiVersion") != api_version {
        return Err(FieldError {
            field: "apiVersion".into(),
            message: format!("must be {api_version}, found {:?}", field("apiVersion")),
        });
    }
    if field("kind") != "EvaluationRun" {
        return Err(FieldError {
            field: "kind".into(),
            message: format!("must be EvaluationRun, found {:?}", field("kind")),
        });
    }
    Ok(())
}

/// The CRD's CEL rules, evaluated here exactly as the API server would, plus the checks CEL
/// cannot express.
pub fn check_rules(run: &EvaluationRun) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Err(cel_errors) = kube::core::cel::validate_cel(run) {
        errors
            .extend(cel_errors.into_vec().into_iter().map(|e| FieldError { field: e.field_path, message: e.message }));
    }
    if run.metadata.name.as_deref().unwrap_or_default().is_empty() {
        errors.push(FieldError { field: "metadata.name".into(), message: "a run needs a name".into() });
    }
    if crate::duration::parse(&run.spec.agent.timeout).is_err()
        && errors.iter().all(|e| e.field != "spec.agent.timeout")
    {
        errors.push(FieldError {
            field: "spec.agent.timeout".into(),
            message: "must be a positive duration such as 90s, 30m or 1h30m".into(),
        });
    }
    errors
}

/// Hash of the spec's canonical JSON: two runs with the same hash evaluate the same thing.
pub fn spec_hash(spec: &EvaluationRunSpec) -> String {
    hash::sha256_hex(&canonical_json(spec))
}

fn canonical_json<T: Serialize>(value: &T) -> Vec<u8> {
    // serde_json::Value keeps object keys sorted (no preserve_order feature), so this is canonical.
    let value = serde_json::to_value(value).expect("spec serialises");
    serde_json::to_vec(&value).expect("value serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {name: demo}
spec:
  dataset: {format: crbugbench, source: "file://datasets/sample/crbugbench.jsonl"}
  agent:
    harness: {name: single-shot, version: "1.0.0"}
  matrix:
    models: [{name: gpt-5-mini, provider: openai}]
  judges:
    panel: [{name: gpt-5-mini, provider: openai}]
  providers:
    openai: {baseUrl: "https://api.openai.com/v1", apiKind: openai-chat}
  storage: {results: "file://results"}
"#;

    fn errors_of(text: &str) -> Vec<FieldError> {
        parse_run(text, "run.yaml").expect_err("should be invalid").errors
    }

    fn fields_of(text: &str) -> Vec<String> {
        errors_of(text).into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_valid_run_parses_with_defaults() {
        let run = parse_run(VALID, "run.yaml").unwrap();
        assert_eq!(run.spec.parallelism, 4);
        assert_eq!(run.spec.judges.k, vec![1, 3, 5]);
        assert_eq!(run.spec.agent.timeout, "30m");
    }

    #[test]
    fn unknown_fields_are_named() {
        let text = VALID.replace("  storage:", "  storag: 1\n  storage:");
        assert_eq!(fields_of(&text), vec!["spec.storag"]);
        let text = VALID.replace("version: \"1.0.0\"}", "version: \"1.0.0\", flavour: x}");
        assert_eq!(fields_of(&text), vec!["spec.agent.harness.flavour"]);
    }

    #[test]
    fn an_unpinned_harness_is_refused() {
        for version in ["latest", "^1.2", "1.x", "*", ""] {
            let text = VALID.replace("\"1.0.0\"", &format!("\"{version}\""));
            let errors = errors_of(&text);
            assert_eq!(errors.len(), 1, "{version}: {errors:?}");
            assert_eq!(errors[0].field, "spec.agent.harness.version");
            assert!(errors[0].message.contains("pinned"), "{}", errors[0].message);
        }
        for version in ["1.0.0", "0.63.0", "2.1.0-beta.3", "v1"] {
            let text = VALID.replace("\"1.0.0\"", &format!("\"{version}\""));
            parse_run(&text, "run.yaml").unwrap_or_else(|e| panic!("{version}: {e}"));
        }
    }

    #[test]
    fn an_empty_matrix_axis_is_refused() {
        let text = VALID.replace("models: [{name: gpt-5-mini, provider: openai}]", "models: []");
        assert_eq!(fields_of(&text), vec!["spec.matrix.models"]);
        let text = VALID.replace("    models:", "    reasoningEfforts: []\n    models:");
        assert_eq!(fields_of(&text), vec!["spec.matrix.reasoningEfforts"]);
    }

    #[test]
    fn numeric_rules_name_their_field() {
        let text = VALID.replace("  storage:", "  parallelism: 0\n  storage:");
        assert_eq!(fields_of(&text), vec!["spec.parallelism"]);
        let text = VALID.replace("    panel:", "    k: [0, 3]\n    panel:");
        assert_eq!(fields_of(&text), vec!["spec.judges.k"]);
    }

    #[test]
    fn cross_field_rules_hold() {
        let text = VALID.replace("provider: openai}]\n  judges", "provider: anthropic}]\n  judges");
        let errors = errors_of(&text);
        assert!(errors[0].message.contains("matrix.models[].provider"), "{errors:?}");
    }

    #[test]
    fn unknown_enum_values_and_bad_uris_are_named() {
        let text = VALID.replace("apiKind: openai-chat", "apiKind: openai-completions");
        let errors = errors_of(&text);
        assert_eq!(errors[0].field, "spec.providers.openai.apiKind");
        let text = VALID.replace("file://results", "/tmp/results");
        assert_eq!(fields_of(&text), vec!["spec.storage.results"]);
    }

    #[test]
    fn wrong_kind_and_bad_yaml_are_reported() {
        assert_eq!(fields_of(&VALID.replace("kind: EvaluationRun", "kind: Job")), vec!["kind"]);
        let errors = errors_of("spec: [unclosed");
        assert!(errors[0].message.contains("not valid YAML"));
    }

    #[test]
    fn spec_hash_ignores_formatting_but_not_content() {
        let a = parse_run(VALID, "a").unwrap();
        let b = parse_run(
            &VALID.replace("  storage: {results: \"file://results\"}", "  storage:\n    results: file://results"),
            "b",
        )
        .unwrap();
        assert_eq!(spec_hash(&a.spec), spec_hash(&b.spec));
        let c = parse_run(&VALID.replace("file://results", "file://other"), "c").unwrap();
        assert_ne!(spec_hash(&a.spec), spec_hash(&c.spec));
    }
}
