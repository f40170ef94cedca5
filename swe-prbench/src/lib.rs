//! The SWE-PRBench protocol, scored exactly as its reference harness scores it
//! (`FoundryHQ-AI/swe-prbench`, `eval_harness/`): the agent's JSON comments, one judge call that
//! classifies them CONFIRMED / PLAUSIBLE / FABRICATED against the human comments, a two-stage
//! one-to-one matching, the per-record metrics and composite, and the aggregates of
//! `eval_report.json`.
//!
//! - [`harness`]: the harness's rules, module by module (dataset layout, agent extraction and
//!   call sequence, prompts, judge message and answer with every fallback, matching, metrics,
//!   report), proven against the harness's own outputs by `core/tests/swe_prbench_golden.rs`.
//! - [`scorer`]: a finished trial scored through those rules with real model calls (the judge,
//!   and embeddings when the run names an endpoint).
//! - [`embeddings`]: the `/v1/embeddings` client.
//!
//! Lightsout's deliberate departures are options of [`harness::Departures`], all off by default;
//! README's "SWE-PRBench: where Lightsout departs" lists them.

pub mod embeddings;
pub mod harness;
pub mod scorer;

use serde::{Deserialize, Serialize};

use lightsout_model::pricing::PricingTable;
use lightsout_model::Usage;

pub use embeddings::{EmbeddingsBackend, SimilarityKind};
pub use lightsout_api::protocol::ProtocolReading;
pub use scorer::{JudgingFailed, PrVerdict, SwePrBenchScorer};

/// Tokens and cost of model calls (judge or embeddings), metered as [`lightsout_core::judge`] does: a
/// call whose model has no price is counted in `unpriced_calls` and left out of `cost_usd`,
/// never priced at 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Metering {
    pub calls: u32,
    pub usage: Usage,
    #[serde(rename = "cost_usd")]
    pub cost_usd: f64,
    pub unpriced_calls: u32,
}

impl Metering {
    /// Adds one call of `model` that used `usage`; `None` usage means the provider reported
    /// none, so its cost is unknown.
    pub fn add_call(&mut self, model: &str, usage: Option<Usage>, pricing: &PricingTable) {
        self.calls += 1;
        match usage {
            Some(usage) => {
                self.usage += usage;
                match pricing.cost(model, &usage) {
                    Some(cost) => self.cost_usd += cost,
                    None => self.unpriced_calls += 1,
                }
            }
            None => self.unpriced_calls += 1,
        }
    }
}

impl Metering {
    pub fn is_zero(&self) -> bool {
        *self == Metering::default()
    }
}

impl std::ops::Add for Metering {
    type Output = Metering;
    fn add(self, other: Metering) -> Metering {
        Metering {
            calls: self.calls + other.calls,
            usage: self.usage + other.usage,
            cost_usd: self.cost_usd + other.cost_usd,
            unpriced_calls: self.unpriced_calls + other.unpriced_calls,
        }
    }
}
