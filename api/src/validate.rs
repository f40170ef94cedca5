//! Reading and checking a run file before anything runs.
//!
//! The CLI applies the same rules the API server applies at `kubectl apply`: the CRD's OpenAPI
//! types (through typed deserialisation), its CEL rules (evaluated client-side with the very
//! rules derived from [`crate`]), and Kubernetes' strict field validation (unknown fields
//! are errors). Every problem names the field it is about.

use std::fmt;

use kube::core::crd::CustomResourceExt;
use serde::Serialize;

use crate::hash;
use crate::{EvaluationRun, EvaluationRunSpec};

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

/// Fields that were renamed: (object path, old name, new name, why). A run file with the old
/// name is refused with a message saying what to write instead (the API server would only say
/// `unknown field`, and only after its YAML reader has mangled the name).
const RENAMED_FIELDS: &[(&[&str], &str, &str, &str)] = &[(
    &["spec", "dataset", "sample"],
    "n",
    "size",
    "Kubernetes and kubectl read YAML 1.1, where a bare n is the boolean false, so the API server would see a field named false",
)];

/// Errors for renamed fields under their old names; each is moved to its new name (unless that is
/// set too) so that the rest of the file is still checked.
fn renamed_fields(value: &mut serde_json::Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (path, old, new, why) in RENAMED_FIELDS {
        let Some(object) = path.iter().try_fold(&mut *value, |v, key| v.get_mut(*key)).and_then(|v| v.as_object_mut())
        else {
            continue;
        };
        let Some(old_value) = object.remove(*old) else { continue };
        let parent = path.join(".");
        let parent = parent.strip_prefix("spec.").unwrap_or(&parent);
        errors.push(FieldError {
            field: format!("{}.{old}", path.join(".")),
            message: format!(
                "unknown field: {parent}.{old} is now {parent}.{new} (write {new}: {old_value}); renamed because {why}"
            ),
        });
        object.entry(new.to_string()).or_insert(old_value);
    }
    errors
}

/// Parses and validates a run file's text. `origin` names the file in messages.
pub fn parse_run(text: &str, origin: &str) -> Result<EvaluationRun, SpecErrors> {
    let fail = |errors: Vec<FieldError>| SpecErrors { origin: origin.to_string(), errors };
    let not_yaml = |e: serde_yaml::Error| {
        let location = e.location().map(|l| format!("line {}, column {}", l.line(), l.column())).unwrap_or_default();
        fail(vec![FieldError { field: location, message: format!("not valid YAML: {e}") }])
    };
    // serde_yaml's own mapping type refuses a key given twice (YAML and JSON allow it, last one
    // wins, and the API server's reader takes one silently); serde_json's would keep the last.
    serde_yaml::from_str::<serde_yaml::Value>(text).map_err(not_yaml)?;
    let mut value: serde_json::Value = serde_yaml::from_str(text).map_err(not_yaml)?;
    check_kind(&value).map_err(|e| fail(vec![e]))?;
    let renamed = renamed_fields(&mut value);

    let mut unknown = Vec::new();
    // serde_ignored writes `?` for Option layers; users think of `spec.agent.harness.flavour`.
    let mut record_unknown = |path: serde_ignored::Path| unknown.push(path.to_string().replace(".?", ""));
    let deserializer = serde_ignored::Deserializer::new(&value, &mut record_unknown);
    let run: EvaluationRun = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let mut errors = renamed.clone();
        errors.push(FieldError {
            field: if field == "." { String::new() } else { field },
            message: e.into_inner().to_string(),
        });
        fail(errors)
    })?;

    let mut errors = renamed;
    errors.extend(
        unknown
            .into_iter()
            // Status is written by the controller; a file that carries one (e.g. from `kubectl get -o yaml`) is fine.
            .filter(|path| !path.starts_with("status"))
            // Checked by check_kind; the derived type does not store them.
            .filter(|path| path != "apiVersion" && path != "kind")
            .map(|path| FieldError { field: path, message: "unknown field".to_string() }),
    );
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

/// The CRD's bounds (`maxLength`, `maxItems`, `maxProperties`, `minItems`) and CEL rules, checked
/// here as the API server would, plus the checks CEL cannot express.
pub fn check_rules(run: &EvaluationRun) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let crd = EvaluationRun::crd();
    if let Some(schema) = crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()) {
        let schema = serde_json::to_value(schema).expect("the CRD schema serialises");
        let spec = serde_json::to_value(&run.spec).expect("the spec serialises");
        check_bounds(&schema["properties"]["spec"], &spec, "spec", &mut errors);
    }
    if let Err(cel_errors) = kube::core::cel::validate_cel(run) {
        errors
            .extend(cel_errors.into_vec().into_iter().map(|e| FieldError { field: e.field_path, message: e.message }));
    }
    if let Err(message) = crate::names::dns1123_subdomain(run.metadata.name.as_deref().unwrap_or_default()) {
        errors.push(FieldError { field: "metadata.name".into(), message });
    }

    if let Err(why) = crate::duration::parse_timeout(&run.spec.agent.timeout) {
        if errors.iter().all(|e| e.field != "spec.agent.timeout") {
            errors.push(FieldError {
                field: "spec.agent.timeout".into(),
                message: format!(
                    "must be a positive duration of at most {} such as 90s, 30m or 1h30m: {why}",
                    crate::AGENT_TIMEOUT_MAX
                ),
            });
        }
    }
    errors.extend(shared_variant_names(&run.spec));
    errors
}

/// Variants are told apart by their display name in every report and table: two that share one
/// (the same model name from two providers) are refused.
fn shared_variant_names(spec: &EvaluationRunSpec) -> Vec<FieldError> {
    let mut first_with_name: std::collections::HashMap<String, crate::variant::Variant> = Default::default();
    let mut errors = Vec::new();
    for variant in crate::variant::variants(spec) {
        match first_with_name.get(&variant.name) {
            Some(first) => errors.push(FieldError {
                field: "spec.matrix.models".into(),
                message: format!(
                    "two variants would both be named {:?} (model {} from providers {} and {}); a variant's name \
                     must identify it in reports: evaluate each provider's model in its own run",
                    variant.name, variant.model.name, first.model.provider, variant.model.provider
                ),
            }),
            None => {
                first_with_name.insert(variant.name.clone(), variant);
            }
        }
    }
    errors
}

/// The schema's size bounds, checked on `value` and everything in it, with the API server's wording.
fn check_bounds(schema: &serde_json::Value, value: &serde_json::Value, path: &str, errors: &mut Vec<FieldError>) {
    let bound = |key: &str| schema.get(key).and_then(serde_json::Value::as_u64);
    let mut error = |message: String| errors.push(FieldError { field: path.to_string(), message });
    match value {
        serde_json::Value::String(text) => {
            let length = text.chars().count() as u64;
            if let Some(max) = bound("maxLength").filter(|max| length > *max) {
                error(format!("Too long: may not be longer than {max} (it has {length} characters)"));
            }
        }
        serde_json::Value::Array(items) => {
            let count = items.len() as u64;
            if let Some(max) = bound("maxItems").filter(|max| count > *max) {
                error(format!("Too many: {count}: must have at most {max} items"));
            }
            if let Some(min) = bound("minItems").filter(|min| count < *min) {
                error(format!("Too few: {count}: must have at least {min} items"));
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_bounds(item_schema, item, &format!("{path}[{i}]"), errors);
                }
            }
        }
        serde_json::Value::Object(fields) => {
            let count = fields.len() as u64;
            if let Some(max) = bound("maxProperties").filter(|max| count > *max) {
                error(format!("Too many: {count}: must have at most {max} items"));
            }
            for (name, field) in fields {
                let field_schema = schema
                    .get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()));
                if let Some(field_schema) = field_schema {
                    check_bounds(field_schema, field, &format!("{path}.{name}"), errors);
                }
            }
        }
        _ => {}
    }
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
    fn the_context_axis_is_swe_prbench_only_unique_and_exclusive_with_agent_context_config() {
        let swe = VALID.replace("format: crbugbench", "format: swe-prbench");
        let axis = |list: &str| format!("    contextConfigs: {list}\n    models:");
        let run = parse_run(&swe.replace("    models:", &axis("[config_A, config_B, config_C]")), "run.yaml").unwrap();
        assert_eq!(run.spec.matrix.context_configs.map(|c| c.len()), Some(3));

        let other_format = errors_of(&VALID.replace("    models:", &axis("[config_A]")));
        assert_eq!(other_format.len(), 1, "{other_format:?}");
        assert!(other_format[0].message.contains("dataset.format swe-prbench"), "{other_format:?}");

        let both = swe
            .replace("    models:", &axis("[config_A, config_C]"))
            .replace("version: \"1.0.0\"}", "version: \"1.0.0\"}\n    contextConfig: config_B");
        let both = errors_of(&both);
        assert_eq!(both.len(), 1, "{both:?}");
        assert!(both[0].message.contains("not both"), "{both:?}");

        let twice = errors_of(&swe.replace("    models:", &axis("[config_A, config_B, config_A]")));
        assert_eq!(twice.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), ["spec.matrix.contextConfigs"]);
        assert!(twice[0].message.contains("twice"), "{twice:?}");
        assert_eq!(fields_of(&swe.replace("    models:", &axis("[]"))), vec!["spec.matrix.contextConfigs"]);
        let unknown = errors_of(&swe.replace("    models:", &axis("[config_D]")));
        assert!(unknown[0].field.starts_with("spec.matrix.contextConfigs"), "{unknown:?}");
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
    fn the_old_sample_n_is_refused_naming_its_new_name() {
        let text = VALID.replace("crbugbench.jsonl\"}", "crbugbench.jsonl\", sample: {n: 5, seed: 1}}");
        let errors = errors_of(&text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "spec.dataset.sample.n");
        for words in ["now dataset.sample.size", "size: 5", "YAML 1.1", "bare n is the boolean false"] {
            assert!(errors[0].message.contains(words), "{words}: {}", errors[0].message);
        }
        // Other problems are still reported beside it.
        let errors = errors_of(&text.replace("file://results", "/tmp/results"));
        assert_eq!(
            errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["spec.dataset.sample.n", "spec.storage.results"]
        );
        // The new name is what a run uses.
        let text = VALID.replace("crbugbench.jsonl\"}", "crbugbench.jsonl\", sample: {size: 5, seed: 1}}");
        assert_eq!(parse_run(&text, "run.yaml").unwrap().spec.dataset.sample.unwrap().size, 5);
        let errors = errors_of(&text.replace("size: 5", "size: 0"));
        assert_eq!(errors[0].field, "spec.dataset.sample.size");
        assert!(errors[0].message.contains("dataset.sample.size must be at least 1"), "{errors:?}");
    }

    #[test]
    fn the_agent_file_cap_is_bounded_as_in_the_crd() {
        let with = |bytes: &str| {
            VALID.replace("version: \"1.0.0\"}", &format!("version: \"1.0.0\"}}\n    maxFileBytes: {bytes}"))
        };
        let run = parse_run(&with("1048576"), "run.yaml").unwrap();
        assert_eq!(run.spec.agent.max_file_bytes, Some(1 << 20));
        assert_eq!(parse_run(VALID, "run.yaml").unwrap().spec.agent.max_file_bytes, None);
        for bad in ["1023", "1073741825", "-1"] {
            let errors = errors_of(&with(bad));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].field, "spec.agent.maxFileBytes", "{bad}");
            assert_eq!(errors[0].message, "agent.maxFileBytes must be between 1024 and 1073741824 (1 GiB)", "{bad}");
        }
    }

    #[test]
    fn the_scratch_size_is_bounded_as_in_the_crd_and_defaults_to_4_gib() {
        let with =
            |mib: &str| VALID.replace("version: \"1.0.0\"}", &format!("version: \"1.0.0\"}}\n    scratchMiB: {mib}"));
        assert_eq!(parse_run(&with("512"), "run.yaml").unwrap().spec.agent.scratch_mib(), 512);
        assert_eq!(parse_run(VALID, "run.yaml").unwrap().spec.agent.scratch_mib(), 4096);
        for bad in ["63", "1048577", "-1"] {
            let errors = errors_of(&with(bad));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].field, "spec.agent.scratchMiB", "{bad}");
            assert_eq!(errors[0].message, "agent.scratchMiB must be between 64 and 1048576 (1 TiB)", "{bad}");
        }
    }

    #[test]
    fn the_schema_bounds_are_checked_as_the_api_server_does() {
        let long = "1.".repeat(40) + "0";
        let errors = errors_of(&VALID.replace("\"1.0.0\"", &format!("\"{long}\"")));
        assert!(
            errors.iter().any(|e| e.field == "spec.agent.harness.version"
                && e.message.contains("Too long: may not be longer than 64")),
            "{errors:?}"
        );
        let harnesses = vec!["{name: single-shot, version: \"1.0.0\"}"; 17].join(", ");
        let text = VALID.replace("    models:", &format!("    harnesses: [{harnesses}]\n    models:"));
        let errors = errors_of(&text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "spec.matrix.harnesses");
        assert_eq!(errors[0].message, "Too many: 17: must have at most 16 items");
        let providers: String =
            (0..33).map(|i| format!("    p{i}: {{baseUrl: \"https://x\", apiKind: anthropic}}\n")).collect();
        let text = VALID.replace("  storage:", &format!("{providers}  storage:"));
        assert_eq!(fields_of(&text), vec!["spec.providers"]);
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

    #[test]
    fn timeouts_are_bounded_by_the_crd_rule_and_by_validate_alike() {
        let with_timeout =
            |timeout: &str| VALID.replace("    harness:", &format!("    timeout: {timeout}\n    harness:"));
        parse_run(&with_timeout("24h"), "run.yaml").unwrap();
        for bad in ["25h", "24h1s", "18446744073709551615s", "0s", "ten minutes", "1m1h"] {
            let errors = errors_of(&with_timeout(bad));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].field, "spec.agent.timeout", "{bad}");
            assert!(errors[0].message.contains("at most 24h"), "{bad}: {}", errors[0].message);
        }
        // Past the CRD's six digits a part, the CEL rule alone may not say why; validate's own
        // check does, and nothing overflows on the way.
        let errors = errors_of(&with_timeout("1000000h"));
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn run_names_must_be_dns_1123_subdomains() {
        for bad in ["../../../../tmp/x", "Demo", "a_b", "\"\""] {
            let errors = errors_of(&VALID.replace("{name: demo}", &format!("{{name: {bad}}}")));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].field, "metadata.name", "{bad}");
        }
        parse_run(&VALID.replace("{name: demo}", "{name: nightly-2026.12.02}"), "run.yaml").unwrap();
    }

    #[test]
    fn a_priority_class_must_be_a_name_kubernetes_accepts() {
        for (bad, why) in [("\"\"", "must name a PriorityClass"), ("Nightly_Low", "must name a PriorityClass")] {
            let errors = errors_of(&VALID.replace("  storage:", &format!("  priorityClassName: {bad}\n  storage:")));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].field, "spec.priorityClassName", "{bad}");
            assert!(errors[0].message.contains(why), "{bad}: {errors:?}");
        }
        parse_run(&VALID.replace("  storage:", "  priorityClassName: nightly-low\n  storage:"), "run.yaml").unwrap();
    }

    #[test]
    fn a_key_given_twice_is_refused() {
        let errors = errors_of(&VALID.replace("  storage:", "  parallelism: 2\n  parallelism: 64\n  storage:"));
        assert!(errors[0].message.contains("duplicate entry with key \"parallelism\""), "{errors:?}");
        let json = r#"{"apiVersion": "lightsout.dev/v1alpha1", "apiVersion": "x", "kind": "EvaluationRun"}"#;
        assert!(errors_of(json)[0].message.contains("duplicate entry with key \"apiVersion\""));
    }

    #[test]
    fn variants_that_would_share_a_display_name_are_refused() {
        let text = VALID
            .replace(
                "models: [{name: gpt-5-mini, provider: openai}]",
                "models: [{name: m, provider: openai}, {name: m, provider: other}]",
            )
            .replace(
                "    openai: {baseUrl",
                "    other: {baseUrl: \"https://x\", apiKind: openai-chat}\n    openai: {baseUrl",
            );
        let errors = errors_of(&text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "spec.matrix.models");
        assert!(errors[0].message.contains("providers openai and other"), "{}", errors[0].message);
        // The same model listed twice is one variant, not a clash.
        let text = VALID.replace(
            "models: [{name: gpt-5-mini, provider: openai}]",
            "models: [{name: gpt-5-mini, provider: openai}, {name: gpt-5-mini, provider: openai}]",
        );
        parse_run(&text, "run.yaml").unwrap();
    }
}
