//! The Lightsout Kubernetes controller: reconciles EvaluationRuns into per-trial Jobs.

pub mod status;
