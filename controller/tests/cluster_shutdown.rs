//! The controller stops when asked, on a real API server, even before its watches have listed
//! anything: with the EvaluationSchedule CRD absent that watch never becomes ready, and a
//! SIGTERM then hung the controller while it kept renewing its Lease. It must exit well within
//! the chart's termination grace period, and give its Lease up so a standby need not wait.
//!
//! This binary has a control plane of its own: it installs only the EvaluationRun CRD.

mod cluster;

use std::time::{Duration, Instant};

use cluster::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use lightsout_testkit::shared;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_before_the_watches_are_ready_stops_the_controller_and_frees_its_lease() {
    let Some(control_plane) = shared() else { return };
    run_ok(control_plane.kubectl().arg("apply").arg("-f").arg(repo_root().join("crds/evaluationrun.yaml")));
    run_ok(control_plane.kubectl().args(["create", "namespace", SYSTEM_NAMESPACE]));
    run_ok(control_plane.kubectl().args(["create", "namespace", "runs"]));
    let config = ControllerConfig {
        namespace: "runs".into(),
        lease_name: "lightsout-shutdown".into(),
        kubeconfig: control_plane.admin_kubeconfig.clone(),
        extra_args: Vec::new(),
    };
    let leases = Api::<Lease>::namespaced(control_plane.client().await, SYSTEM_NAMESPACE);
    let holder = async || leases.get_opt("lightsout-shutdown").await.ok()??.spec?.holder_identity;

    let mut controller = Controller::start(control_plane, &config, "terminated");
    eventually(
        "the controller to lead",
        Duration::from_secs(60),
        async || holder().await.filter(|h| h == "terminated"),
        || controller.process.log_tail(40),
    )
    .await;
    // The schedule watch cannot list: there is no such resource.
    tokio::time::sleep(Duration::from_secs(2)).await;
    controller.process.signal(libc::SIGTERM);
    let asked = Instant::now();
    let status = controller.process.wait_timeout(Duration::from_secs(30));
    let log = controller.process.log_tail(40);
    let status = status.unwrap_or_else(|| panic!("the controller did not exit within 30 s of SIGTERM:\n{log}"));
    eprintln!("exited {:.1} s after SIGTERM ({status})", asked.elapsed().as_secs_f64());
    assert!(status.success(), "{status}\n{log}");
    assert_eq!(holder().await, None, "the Lease was not given up:\n{log}");

    // A standby started now leads at once, without waiting for the Lease to expire.
    let standby = Controller::start(control_plane, &config, "standby");
    let started = Instant::now();
    eventually(
        "the standby to lead",
        Duration::from_secs(10),
        async || holder().await.filter(|h| h == "standby"),
        || standby.process.log_tail(40),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(10));
}
