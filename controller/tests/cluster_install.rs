//! Installing Lightsout on a real API server, as users do: the generated CRDs with `kubectl
//! apply` (client-side and `--server-side`), `manifests/install.yaml` with `--server-side`,
//! and `helm install` of the chart; the examples are accepted; every malformed EvaluationRun
//! and EvaluationSchedule of `tests/api_server/malformed/` is refused by the API server itself
//! with the field and message its header names; and the CRDs' CEL rules stay well within the
//! API server's cost budget (accepted with every bound eight times larger).
//!
//! The tests of this file share one control plane and run one after another (one test): the
//! install paths create the same cluster-scoped objects.

mod cluster;

use std::path::Path;

use cluster::*;
use lightsout_testkit::shared;
use serde_json::Value;

fn apply(control_plane: &lightsout_testkit::ControlPlane, args: &[&str], file: &Path) -> (bool, String) {
    let output = control_plane.kubectl().arg("apply").args(args).arg("-f").arg(file).output().unwrap();
    (output.status.success(), format!("{}{}", stdout(&output), stderr(&output)))
}

/// The `# expect-field:` and `# expect-message:` lines of a malformed manifest's header.
fn expectations(text: &str) -> (String, String) {
    let header = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("# {key}: ")))
            .unwrap_or_else(|| panic!("no {key} line"))
            .to_string()
    };
    (header("expect-field"), header("expect-message"))
}

/// The CRD with every maxLength, maxItems and maxProperties of its schema times `factor`.
fn scaled(crd: &Value, factor: u64) -> Value {
    fn walk(node: &mut Value, factor: u64) {
        if let Value::Object(map) = node {
            for key in ["maxLength", "maxItems", "maxProperties"] {
                if let Some(n) = map.get(key).and_then(Value::as_u64) {
                    map.insert(key.into(), (n * factor).into());
                }
            }
            for value in map.values_mut() {
                walk(value, factor);
            }
        } else if let Value::Array(items) = node {
            for item in items {
                walk(item, factor);
            }
        }
    }
    let mut crd = crd.clone();
    for version in crd["spec"]["versions"].as_array_mut().unwrap() {
        walk(&mut version["schema"], factor);
    }
    crd
}

#[tokio::test]
async fn lightsout_installs_and_the_api_server_refuses_malformed_objects() {
    let Some(control_plane) = shared() else { return };
    let root = repo_root();
    let version = control_plane.binaries.version.clone();

    // 1. The generated CRDs, client-side then server-side, with no warning (1.36 warned about
    //    unknown formats).
    for crd in ["crds/evaluationrun.yaml", "crds/evaluationschedule.yaml"] {
        for args in [&[][..], &["--server-side", "--force-conflicts"][..]] {
            let (ok, output) = apply(control_plane, args, &root.join(crd));
            assert!(ok, "Kubernetes {version} refused {crd} ({args:?}):\n{output}");
            assert!(!output.contains("Warning"), "Kubernetes {version} warned on {crd}:\n{output}");
        }
    }
    run_ok(control_plane.kubectl().args([
        "wait",
        "--for=condition=Established",
        "crd/evaluationruns.lightsout.dev",
        "crd/evaluationschedules.lightsout.dev",
        "--timeout=60s",
    ]));

    // 2. The CEL cost budget, with margin: the same CRDs with every bound ×8 are still accepted.
    for crd in ["crds/evaluationrun.yaml", "crds/evaluationschedule.yaml"] {
        let value: Value = serde_yaml::from_str(&std::fs::read_to_string(root.join(crd)).unwrap()).unwrap();
        let file = control_plane.scratch_dir("scaled-crd").join("crd.json");
        std::fs::write(&file, serde_json::to_string(&scaled(&value, 8)).unwrap()).unwrap();
        let (ok, output) = apply(control_plane, &["--dry-run=server"], &file);
        assert!(
            ok,
            "{crd} with every bound ×8 exceeds the CEL cost budget of Kubernetes {version}: a new rule or bound leaves too little margin:\n{output}"
        );
    }

    // 3. Malformed objects: refused by the API server, naming the field.
    let namespace = "install-checks";
    run_ok(control_plane.kubectl().args(["create", "namespace", namespace]));
    for valid in ["valid/run.yaml", "valid/schedule.yaml"] {
        let (ok, output) =
            apply(control_plane, &["--dry-run=server", "-n", namespace], &root.join("tests/api_server").join(valid));
        assert!(ok, "{valid} refused:\n{output}");
    }
    let mut cases: Vec<_> =
        std::fs::read_dir(root.join("tests/api_server/malformed")).unwrap().flatten().map(|e| e.path()).collect();
    cases.sort();
    assert!(cases.len() >= 15, "{} malformed cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let (field, message) = expectations(&std::fs::read_to_string(case).unwrap());
        let (ok, output) = apply(control_plane, &["--dry-run=server", "-n", namespace], case);
        let name = case.file_name().unwrap().to_string_lossy();
        if ok {
            failures.push(format!("{name}: accepted"));
        } else if !output.contains(&field) || !output.contains(&message) {
            failures.push(format!("{name}: expected {field:?} and {message:?} in:\n{output}"));
        }
    }
    assert!(failures.is_empty(), "Kubernetes {version}:\n{}", failures.join("\n"));
    eprintln!("Kubernetes {version}: {} malformed objects refused, each naming its field", cases.len());

    // 4. Every example a user applies.
    for example in std::fs::read_dir(root.join("manifests/examples")).unwrap().flatten() {
        let (ok, output) = apply(control_plane, &["--dry-run=server", "-n", namespace], &example.path());
        assert!(ok, "{} refused:\n{output}", example.path().display());
    }

    // 5. manifests/install.yaml, server-side (as README says), then removed again.
    let install = root.join("manifests/install.yaml");
    let (ok, output) = apply(control_plane, &["--server-side", "--force-conflicts"], &install);
    assert!(ok, "install.yaml refused by Kubernetes {version}:\n{output}");
    assert!(!output.contains("Warning"), "Kubernetes {version} warned on install.yaml:\n{output}");
    run_ok(control_plane.kubectl().args(["delete", "--wait=true", "--ignore-not-found", "-f"]).arg(&install));

    // 6. helm install of the chart, CRDs included.
    let output = helm_install(control_plane);
    assert!(output.status.success(), "helm install on Kubernetes {version}:\n{}{}", stdout(&output), stderr(&output));
    let deployments =
        run_ok(control_plane.kubectl().args(["get", "deployments", "-n", SYSTEM_NAMESPACE, "-o", "name"]));
    assert!(deployments.contains("deployment.apps/lightsout-controller"), "{deployments}");
}
