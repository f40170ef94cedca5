//! The install artifacts, checked with the real tools: the Helm chart (helm lint, helm template
//! with default values and with every option on, validated strictly for the supported
//! Kubernetes versions; schema refusals; `manifests/install.yaml` drift; every example run
//! against the CRD, CEL rules included, through this very `lightsout validate`), and the alert
//! rules (promtool check/test rules: every alert fires where it should and stays silent where it
//! should) with the Grafana dashboard's queries. The checks live in scripts a user can run too;
//! they need helm, kubernetes-validate and promtool (`scripts/install-helm.sh` and
//! `apt-get install prometheus`; `.ci/run` installs them).

use std::path::Path;
use std::process::Command;

fn run_script(script: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = Command::new("bash")
        .arg(root.join(script))
        .current_dir(&root)
        .env("LIGHTSOUT_BIN", env!("CARGO_BIN_EXE_lightsout"))
        .output()
        .unwrap_or_else(|e| panic!("running {script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{script} failed ({}):\n{stdout}\n{stderr}", output.status);
    println!("{stdout}");
}

#[test]
fn the_chart_renders_validates_and_refuses_bad_values() {
    run_script("scripts/check-chart.sh");
}

#[test]
fn every_alert_fires_and_stays_silent_where_it_should() {
    run_script("scripts/check-alerts.sh");
}
