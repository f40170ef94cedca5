//! SWE-PRBench scored exactly as its reference harness scores it (`FoundryHQ-AI/swe-prbench`,
//! `eval_harness/`, commit `379f0bfd8978a1734cd8399e115d04d4fdceeb89`; rules in our words in
//! `tests/golden/swe-prbench/HARNESS.md`). This is our own code; the harness's outputs on our
//! golden cases are the test (`core/tests/swe_prbench_golden.rs`).
//!
//! The pieces, in the order a record goes through them:
//! - [`layout`]: the benchmark's dataset layout → one [`EvalInput`] per (task, configuration);
//! - [`agent`]: the agent's calls and the one parser that decides its comments;
//! - [`verdict`]: the judge's answer, its ids and schema, and every fallback;
//! - [`record`]: matching, duplicate clusters, the per-record metrics and composite
//!   ([`EvalResult`]), with similarities from [`similarity`];
//! - [`report`]: the aggregates of `eval_report.json`.
//!
//! Lightsout's own readings are options of [`Departures`], all off by default.
//!
//! Python semantics the harness relies on (`int()`, `str()`, truthiness, `round()`, JSON
//! decoding) are in [`python`].

pub mod agent;
pub mod judge_diff;
pub mod judge_message;
pub mod layout;
pub mod prompts;
pub mod python;
pub mod record;
pub mod report;
pub mod similarity;
pub mod verdict;

#[cfg(test)]
mod tests;

pub use agent::{run_agent, AgentCall, AgentCallKind, AgentComment, AgentOutput};
pub use layout::{BenchmarkLayout, EvalInput, LayoutError};
pub use lightsout_api::protocol::Departures;
pub use record::{evaluate_record, EvalResult};
pub use report::{eval_report, EvalReport};
pub use similarity::{Embedder, Scoring, Similarity};
pub use verdict::{judge_output, judge_skipped, JudgeOutput};
