//! The Lightsout Kubernetes controller: reconciles EvaluationRuns into per-trial Jobs.

pub mod backoff;
pub mod budget;
pub mod job;
pub mod labels;
pub mod network;
pub mod observation;
pub mod observe;
pub mod schedule;
pub mod status;
