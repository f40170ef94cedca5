//! What the generated OpenAPI schemas need beyond the types' shape, for a real API server to
//! accept the CRDs: bounds on every string, list and map of a spec, and only the `format` values
//! Kubernetes knows.
//!
//! **Bounds.** The API server estimates the worst-case cost of every CEL rule from the sizes the
//! schema allows: a string without `maxLength`, a list without `maxItems` or a map without
//! `maxProperties` counts as large as a whole request (3 MiB), and a CRD whose rules could cost
//! more than its budget is refused (`estimated rule cost exceeds budget`). Every string, list and
//! map under `spec` therefore carries a bound (enums are bounded by their values), chosen from
//! what a real run needs; the constants below are those bounds, and README.md lists them. The
//! schemas of embedded Kubernetes types (`ResourceRequirements`, `Toleration`) are bounded by the
//! transforms [`resources`] and [`tolerations`]. The test `every_spec_value_is_bounded` walks both
//! CRDs and fails on any unbounded one.
//!
//! **Formats.** schemars names Rust's integer types (`uint32`, `uint8`, …); Kubernetes knows
//! `int32`, `int64`, `float`, `double` and a few string formats, and 1.36+ warns about any other
//! (`unrecognized format "uint32"`). [`kubernetes_formats`] drops the others, keeping the
//! `minimum: 0` an unsigned type implies.

use schemars::transform::{transform_subschemas, Transform};
use schemars::Schema;
use serde_json::{json, Map, Value};

/// Names of Kubernetes objects (a Secret, a run): a DNS subdomain (RFC 1123).
pub const NAME_MAX: u32 = 253;
/// DNS labels and label values: a provider's name (a key of `spec.providers`), a Kueue
/// LocalQueue (its name goes into a label), an S3 region, a label value.
pub const LABEL_MAX: u32 = 63;
/// A label or taint key: an optional DNS-subdomain prefix, `/`, and a 63-character name.
pub const QUALIFIED_NAME_MAX: u32 = 317;
/// A model name as the provider spells it (`claude-sonnet-4-5`, `Qwen/Qwen3-Coder-30B-A3B-Instruct`).
pub const MODEL_NAME_MAX: u32 = 253;
/// A harness version (`0.171.0`, `2.1.0-beta.3`).
pub const VERSION_MAX: u32 = 64;
/// URLs and URIs: a provider's base URL, an S3 endpoint, `dataset.source`, `storage.results`.
pub const URL_MAX: u32 = 2048;
/// An inline prompt's text: 64 KiB, many times a real review prompt (the presets are under 4 KiB).
pub const PROMPT_MAX: u32 = 65_536;
/// A duration such as `1h30m`.
pub const DURATION_MAX: u32 = 32;
/// A cron schedule: five fields.
pub const CRON_MAX: u32 = 128;
/// An IANA time zone (the longest, `America/Argentina/ComodRivadavia`, has 32 characters).
pub const TIME_ZONE_MAX: u32 = 64;
/// Short words of an open set: a language, a difficulty, a toleration's operator or effect.
pub const WORD_MAX: u32 = 63;
/// An annotation's value in a schedule's run template.
pub const ANNOTATION_VALUE_MAX: u32 = 4096;

/// Models under evaluation in one run (`matrix.models`).
pub const MODELS_MAX: u32 = 64;
/// Models a schedule evaluates (`models`).
pub const SCHEDULE_MODELS_MAX: u32 = 32;
/// Judges on the panel.
pub const PANEL_MAX: u32 = 9;
/// Providers of one run.
pub const PROVIDERS_MAX: u32 = 32;
/// Harnesses or prompts compared in one run (`matrix.harnesses`, `matrix.prompts`).
pub const AXIS_MAX: u32 = 16;
/// Context configurations of one run (`matrix.contextConfigs`): each of the three at most once.
pub const CONTEXT_CONFIGS_MAX: u32 = 3;
/// Reasoning efforts of one run: each of the six at most once.
pub const EFFORTS_MAX: u32 = 6;
/// Cut-offs of recall@k (`judges.k`).
pub const CUTOFFS_MAX: u32 = 16;
/// Task ids in `dataset.filter.ids`.
pub const TASK_IDS_MAX: u32 = 1000;
/// Languages or difficulties in `dataset.filter`.
pub const FILTER_VALUES_MAX: u32 = 32;
/// Tracks in `dataset.filter.tracks`: there are two.
pub const TRACKS_MAX: u32 = 2;
/// Node selector entries, tolerations, labels and annotations of a run's pods or template.
pub const PLACEMENT_MAX: u32 = 32;
/// Labels and annotations of a schedule's run template.
pub const TEMPLATE_METADATA_MAX: u32 = 64;
/// Entries of `resources.limits` / `resources.requests`, and `resources.claims`.
pub const RESOURCES_MAX: u32 = 16;
/// A resource quantity (`500m`, `2Gi`).
pub const QUANTITY_MAX: u32 = 64;

/// Formats the Kubernetes API server recognises: the numeric ones and its string formats.
pub const KUBERNETES_FORMATS: &[&str] = &[
    "int32",
    "int64",
    "float",
    "double",
    "byte",
    "binary",
    "password",
    "date",
    "date-time",
    "datetime",
    "duration",
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
];

/// Removes every `format` Kubernetes does not recognise from a schema and its subschemas; an
/// unsigned integer format (`uint32`, `uint`, …) leaves `minimum: 0` behind.
pub fn kubernetes_formats(schema: &mut Schema) {
    struct Formats;
    impl Transform for Formats {
        fn transform(&mut self, schema: &mut Schema) {
            if let Some(object) = schema.as_object_mut() {
                if let Some(format) = object.get("format").and_then(Value::as_str).map(str::to_owned) {
                    if !KUBERNETES_FORMATS.contains(&format.as_str()) {
                        object.remove("format");
                        let unsigned = format.starts_with("uint") || format == "usize";
                        let negative_allowed = object.get("minimum").and_then(Value::as_f64).is_none_or(|m| m < 0.0);
                        if unsigned && negative_allowed {
                            object.insert("minimum".into(), json!(0));
                        }
                    }
                }
            }
            transform_subschemas(self, schema);
        }
    }
    Formats.transform(schema);
}

/// The schema nodes a transform applies to: the schema itself, or each branch of an `anyOf`
/// (how schemars writes an `Option` of a non-inlined type before the CRD's `nullable` rewrite).
fn branches(schema: &mut Schema) -> Vec<&mut Map<String, Value>> {
    let Some(object) = schema.as_object_mut() else { return Vec::new() };
    if object.contains_key("properties") || object.contains_key("items") || object.contains_key("type") {
        return vec![object];
    }
    match object.get_mut("anyOf").and_then(Value::as_array_mut) {
        Some(branches) => branches.iter_mut().filter_map(Value::as_object_mut).collect(),
        None => Vec::new(),
    }
}

fn property<'a>(object: &'a mut Map<String, Value>, name: &str) -> Option<&'a mut Map<String, Value>> {
    object.get_mut("properties")?.get_mut(name)?.as_object_mut()
}

fn set(object: &mut Map<String, Value>, key: &str, max: u32) {
    object.insert(key.into(), json!(max));
}

/// `maxProperties` on a map and `maxLength` on its values.
fn bound_map(object: &mut Map<String, Value>, max_properties: u32, value_max: u32) {
    set(object, "maxProperties", max_properties);
    if let Some(values) = object.get_mut("additionalProperties").and_then(Value::as_object_mut) {
        set(values, "maxLength", value_max);
    }
}

/// A map of label values (`placement.nodeSelector`).
pub fn node_selector(schema: &mut Schema) {
    for object in branches(schema) {
        bound_map(object, PLACEMENT_MAX, LABEL_MAX);
    }
}

/// A schema's run template: its labels.
pub fn template_labels(schema: &mut Schema) {
    for object in branches(schema) {
        bound_map(object, TEMPLATE_METADATA_MAX, LABEL_MAX);
    }
}

/// A schema's run template: its annotations.
pub fn template_annotations(schema: &mut Schema) {
    for object in branches(schema) {
        bound_map(object, TEMPLATE_METADATA_MAX, ANNOTATION_VALUE_MAX);
    }
}

/// Kubernetes' `ResourceRequirements` (`agent.resources`): a few claims and quantities.
pub fn resources(schema: &mut Schema) {
    for object in branches(schema) {
        for name in ["limits", "requests"] {
            if let Some(map) = property(object, name) {
                bound_map(map, RESOURCES_MAX, QUANTITY_MAX);
            }
        }
        if let Some(claims) = property(object, "claims") {
            set(claims, "maxItems", RESOURCES_MAX);
            if let Some(claim) = claims.get_mut("items").and_then(Value::as_object_mut) {
                for name in ["name", "request"] {
                    if let Some(field) = property(claim, name) {
                        set(field, "maxLength", NAME_MAX);
                    }
                }
            }
        }
    }
}

/// Kubernetes' `Toleration`s (`placement.tolerations`).
pub fn tolerations(schema: &mut Schema) {
    for object in branches(schema) {
        set(object, "maxItems", PLACEMENT_MAX);
        if let Some(toleration) = object.get_mut("items").and_then(Value::as_object_mut) {
            for (name, max) in
                [("key", QUALIFIED_NAME_MAX), ("value", LABEL_MAX), ("operator", WORD_MAX), ("effect", WORD_MAX)]
            {
                if let Some(field) = property(toleration, name) {
                    set(field, "maxLength", max);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::CustomResourceExt;
    use serde_json::Value;

    use super::KUBERNETES_FORMATS;
    use crate::{EvaluationRun, EvaluationSchedule};

    fn schemas() -> Vec<(&'static str, Value)> {
        let schema =
            |crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition| {
                serde_json::to_value(crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap())
                    .unwrap()
            };
        vec![("EvaluationRun", schema(EvaluationRun::crd())), ("EvaluationSchedule", schema(EvaluationSchedule::crd()))]
    }

    /// Calls `visit(path, node)` for every schema node.
    fn walk(path: &str, node: &Value, visit: &mut dyn FnMut(&str, &serde_json::Map<String, Value>)) {
        let Some(object) = node.as_object() else { return };
        visit(path, object);
        if let Some(properties) = object.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                walk(&format!("{path}.{name}"), child, visit);
            }
        }
        if let Some(items) = object.get("items") {
            walk(&format!("{path}[]"), items, visit);
        }
        if let Some(values) = object.get("additionalProperties") {
            walk(&format!("{path}.*"), values, visit);
        }
    }

    #[test]
    fn every_spec_value_is_bounded() {
        for (kind, schema) in schemas() {
            let mut unbounded = Vec::new();
            walk(kind, &schema["properties"]["spec"], &mut |path, node| {
                let ty = node.get("type").and_then(Value::as_str);
                let int_or_string = node.get("x-kubernetes-int-or-string").is_some();
                let bounded = match ty {
                    Some("string") => node.contains_key("maxLength") || node.contains_key("enum"),
                    Some("array") => node.contains_key("maxItems"),
                    Some("object") if node.contains_key("additionalProperties") => node.contains_key("maxProperties"),
                    None if int_or_string => node.contains_key("maxLength"),
                    _ => true,
                };
                if !bounded {
                    unbounded.push(path.to_string());
                }
            });
            assert!(unbounded.is_empty(), "{kind}: unbounded strings, lists or maps: {unbounded:#?}");
        }
    }

    #[test]
    fn only_formats_kubernetes_knows() {
        for (kind, schema) in schemas() {
            walk(kind, &schema, &mut |path, node| {
                if let Some(format) = node.get("format").and_then(Value::as_str) {
                    assert!(KUBERNETES_FORMATS.contains(&format), "{path}: format {format:?}");
                }
            });
        }
        // An unsigned integer keeps its lower bound.
        let (_, schedule) = &schemas()[1];
        let k = &schedule["properties"]["spec"]["properties"]["comparison"]["properties"]["k"];
        assert_eq!(k["minimum"].as_f64(), Some(0.0), "{k}");
        assert!(k.get("format").is_none(), "{k}");
    }

    /// Scalars that a YAML 1.1 reader (Kubernetes', kubectl's) takes for booleans or null, while
    /// YAML 1.2 writers leave them bare: `n` becomes `false`.
    fn yaml_1_1_special(text: &str) -> bool {
        const WORDS: &[&str] = &["y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"];
        WORDS.contains(&text.to_ascii_lowercase().as_str())
    }

    #[test]
    fn no_field_name_or_enum_value_reads_differently_in_yaml_1_1() {
        for (kind, schema) in schemas() {
            walk(kind, &schema, &mut |path, node| {
                for name in node.get("properties").and_then(Value::as_object).into_iter().flat_map(|p| p.keys()) {
                    assert!(!yaml_1_1_special(name), "{path}: field {name:?}");
                }
                for key in ["required", "enum"] {
                    for value in node.get(key).and_then(Value::as_array).into_iter().flatten() {
                        if let Some(text) = value.as_str() {
                            assert!(!yaml_1_1_special(text), "{path}: {key} {text:?}");
                        }
                    }
                }
            });
        }
    }
}
