//! Prices per million tokens, shared by the worker's metering proxy and the judges.
//!
//! The table is a YAML file (`pricing.yaml` at the repository root is the default, compiled in)
//! that users override with a file or, in a cluster, a ConfigMap. A model missing from the table
//! has an unknown cost: reported as unknown and counted apart, never as zero.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Usage;

/// USD per million tokens of each kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Cached input reads; the input price when absent.
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Cache writes (Anthropic); the input price when absent.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricingTable {
    /// Model name → price. A dated model (`gpt-5-mini-2025-08-07`) takes the price of the
    /// longest listed name it starts with.
    pub models: BTreeMap<String, Price>,
}

const DEFAULT_TABLE: &str = include_str!("../../pricing.yaml");

impl Default for PricingTable {
    fn default() -> Self {
        Self::from_yaml(DEFAULT_TABLE).expect("the built-in pricing table parses")
    }
}

impl PricingTable {
    pub fn from_yaml(text: &str) -> Result<Self, serde_yaml::Error> {
        serde_yaml::from_str(text)
    }

    pub fn price(&self, model: &str) -> Option<&Price> {
        if let Some(price) = self.models.get(model) {
            return Some(price);
        }
        self.models
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()) && model[name.len()..].starts_with('-'))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    }

    /// The cost of `usage` on `model` in USD; `None` when the model has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        let price = self.price(model)?;
        let per = |tokens: u64, rate: f64| tokens as f64 * rate / 1_000_000.0;
        Some(
            per(usage.uncached_input_tokens(), price.input)
                + per(usage.cached_read_tokens, price.cached_input.unwrap_or(price.input))
                + per(usage.cache_write_tokens, price.cache_write.unwrap_or(price.input))
                + per(usage.output_tokens, price.output),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_each_kind_of_token_at_its_rate() {
        let table =
            PricingTable::from_yaml("models:\n  m: {input: 2.0, output: 10.0, cachedInput: 0.5, cacheWrite: 2.5}\n")
                .unwrap();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cached_read_tokens: 200_000,
            cache_write_tokens: 100_000,
            reasoning_tokens: 50_000,
        };
        // 700k uncached × 2 + 200k × 0.5 + 100k × 2.5 + 100k out × 10 (reasoning is inside output)
        let expected = 1.4 + 0.1 + 0.25 + 1.0;
        assert!((table.cost("m", &usage).unwrap() - expected).abs() < 1e-12);
    }

    #[test]
    fn dated_models_take_the_longest_prefix_and_unknown_models_have_no_cost() {
        let table = PricingTable::default();
        assert_eq!(table.price("gpt-5-mini-2025-08-07"), table.price("gpt-5-mini"));
        assert_ne!(table.price("gpt-5-mini"), table.price("gpt-5"));
        assert_eq!(table.cost("no-such-model", &Usage::default()), None);
        assert!(table.price("gpt-5minister").is_none());
    }
}
