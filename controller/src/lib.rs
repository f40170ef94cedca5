//! The Lightsout Kubernetes controller: reconciles EvaluationRuns into per-trial Jobs.

pub mod backoff;
pub mod budget;
pub mod context;
pub mod error;
pub mod finalize;
pub mod http;
pub mod job;
pub mod labels;
pub mod leader;
pub mod metrics;
pub mod network;
pub mod observation;
pub mod observe;
pub mod reconcile;
pub mod run_state;
pub mod schedule;
pub mod status;
