//! The committed CRD YAML must be exactly what the API types generate.

mod common;

#[test]
fn committed_crd_matches_the_types() {
    let output = common::lightsout(&["crdgen", "-o", "crds/evaluationrun.yaml", "--check"]);
    assert!(output.status.success(), "crds/evaluationrun.yaml has drifted from api/src: {}", common::stderr(&output));
}

#[test]
fn the_chart_ships_the_same_crd() {
    let output = common::lightsout(&["crdgen", "-o", "charts/lightsout/crds/evaluationrun.yaml", "--check"]);
    assert!(
        output.status.success(),
        "charts/lightsout/crds/evaluationrun.yaml has drifted: {}",
        common::stderr(&output)
    );
}

#[test]
fn the_schedule_crd_matches_the_types_in_crds_and_the_chart() {
    for path in ["crds/evaluationschedule.yaml", "charts/lightsout/crds/evaluationschedule.yaml"] {
        let output = common::lightsout(&["crdgen", "--kind", "schedule", "-o", path, "--check"]);
        assert!(output.status.success(), "{path} has drifted from api/src: {}", common::stderr(&output));
    }
}

#[test]
fn drift_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("crd.yaml");
    let current = std::fs::read_to_string(common::repo_root().join("crds/evaluationrun.yaml")).unwrap();
    std::fs::write(&stale, current.replace("maxItems: 64", "maxItems: 65")).unwrap();
    let output = common::lightsout(&["crdgen", "-o", stale.to_str().unwrap(), "--check"]);
    assert!(!output.status.success());
    assert!(common::stderr(&output).contains("differs from what the API types generate"));
}
