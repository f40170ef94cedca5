//! The Lightsout worker: runs one trial (`trial`), with the harness the variant names
//! (`harness`). `lightsout run` runs many trials on one machine through the same code
//! (`local`); in a cluster, the `lightsout-worker` binary runs one per pod.

pub mod agent_files;
pub mod agent_process;
pub mod harness;
pub mod interruption;
/// The job a trial pod runs (shared with the controller, which writes it).
pub use lightsout_core::pod_job as job;
pub mod local;
pub mod proxy;
pub mod sandbox;
pub mod sandbox_init;
pub mod scratch;
pub mod seccomp;
mod session_log;
pub mod trial;
pub mod uid_lease;
pub mod user_namespace;
