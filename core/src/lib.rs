//! Lightsout's shared library: the Kubernetes API types and the evaluation domain (datasets,
//! trial planning, judging, scoring, results) used by the CLI, the worker and the controller.

pub mod api;
pub mod compare;
pub mod compress;
pub mod dataset;
pub mod duration;
pub mod exchange;
pub mod findings;
pub mod hash;
pub mod interruption;
pub mod judge;
pub mod model;
pub mod names;
pub mod plan;
pub mod pod_job;
pub mod pricing;
pub mod prompts;
pub mod report;
pub mod results;
pub mod run_record;
pub mod scoring;
pub mod stats;
pub mod stored;
pub mod summary;
pub mod swe_prbench;
pub mod trajectory;
pub mod trial;
pub mod validate;
pub mod workspace;
