//! Lightsout's evaluation domain: datasets, trial planning, prompts, findings, judging (the
//! CRBugBench panel), scoring, stored results and the summary, used by the CLI, the worker and
//! the controller. The API types are `lightsout-api`, the model client `lightsout-model`, the
//! SWE-PRBench protocol `lightsout-swe-prbench`, the report `lightsout-report`.

pub mod compress;
pub mod dataset;
pub mod findings;
pub mod interruption;
pub mod judge;
pub mod plan;
pub mod pod_job;
pub mod prompts;
pub mod results;
pub mod run_record;
pub mod scoring;
pub mod stored;
pub mod summary;
pub mod trial;
pub mod trial_record;
pub mod workspace;
