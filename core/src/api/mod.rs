//! Kubernetes API types: what users `kubectl apply` and what the controller writes back.

mod evaluation_run;
mod evaluation_run_status;
mod evaluation_schedule;
pub mod schema;

pub use evaluation_run::*;
pub use evaluation_run_status::*;
pub use evaluation_schedule::*;
