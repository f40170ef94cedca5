//! Kubernetes API types: what users `kubectl apply` and what the controller writes back, with
//! their CEL rules, the validation CEL cannot express (`validate`), the variants a spec expands
//! to (`variant`) and the CustomResourceDefinitions generated from them (`crd`).

pub mod crd;
pub mod duration;
mod evaluation_run;
mod evaluation_run_status;
mod evaluation_schedule;
pub mod hash;
pub mod names;
pub mod protocol;
pub mod schema;
pub mod validate;
pub mod variant;

pub use evaluation_run::*;
pub use evaluation_run_status::*;
pub use evaluation_schedule::*;
