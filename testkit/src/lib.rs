//! Lightsout's test kit: a real Kubernetes control plane on loopback, for the tests that must
//! prove the controller on the API server it will meet rather than on a fake.
//!
//! - [`binaries`]: where the control plane's programs are (built by
//!   `scripts/install-control-plane.sh VERSION` from their Go modules) and the workspace's own.
//! - [`control_plane`]: etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
//!   127.0.0.1 with certificates ([`pki`]) and kubeconfigs ([`kubeconfig`]); one per test binary
//!   ([`shared`]), tests apart by namespace.
//! - [`kubelet`]: fake nodes and a stand-in kubelet that runs every pod's containers as local
//!   processes in namespaces of their own, from the images of [`images`].
//! - [`kueue`]: Kueue's manager on that control plane, its webhooks on loopback, built by
//!   `scripts/install-kueue.sh VERSION`.
//! - [`process`]: child processes that never outlive the test process.

pub mod binaries;
pub mod control_plane;
pub mod images;
pub mod kubeconfig;
pub mod kubelet;
pub mod kueue;
pub mod pki;
pub mod process;

pub use control_plane::{shared, ControlPlane};
pub use images::{Image, Images};

/// Selects ring as rustls's process-wide provider (the dependency graph also holds aws-lc-rs,
/// and a TLS client panics when both are present and none is chosen).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
