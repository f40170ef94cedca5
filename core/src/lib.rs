//! Lightsout's shared library: the Kubernetes API types and the evaluation domain (datasets,
//! trial planning, judging, scoring, results) used by the CLI, the worker and the controller.

pub mod api;
pub mod duration;
pub mod dataset;
pub mod hash;
pub mod plan;
pub mod validate;
