//! Embeddings from an OpenAI-compatible `/v1/embeddings` endpoint, for SWE-PRBench's semantic
//! similarity (the harness's `all-mpnet-base-v2`, or whatever model the run names).
//!
//! Rules:
//! - One call embeds all of a record's texts: `POST {base_url}/embeddings` with
//!   `{model, input: [..]}`, answered with `{data: [{embedding, index}], usage: {prompt_tokens}}`.
//!   The call is metered; an answer without `usage` counts as an unpriced call.
//! - A provider failure is an infrastructure failure: the trial is judged again later (the
//!   harness, which has no such notion, falls back to Jaccard).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Metering;
use lightsout_model::pricing::PricingTable;
use lightsout_model::{CallError, Endpoint, ModelClient, Usage};

/// Which similarity a verdict used; reports must say so when it is lexical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SimilarityKind {
    /// No embedding endpoint was configured: the harness's Jaccard overlap (or, with the
    /// `lexicalCosine` departure, term-count cosines).
    Lexical,
    /// Cosine of embeddings from the configured endpoint.
    Embeddings,
}

/// An embedding model at an OpenAI-compatible endpoint (its `api_kind` is not used: the
/// embeddings API is OpenAI's shape everywhere).
#[derive(Debug, Clone)]
pub struct EmbeddingsBackend {
    pub endpoint: Endpoint,
    pub model: String,
    /// The judges' model client: embeddings calls share the provider's adaptive limit and retry
    /// rules with every other call to it.
    pub client: ModelClient,
}

impl EmbeddingsBackend {
    /// The embedding of each text, in order (one call for all of them), and the usage the
    /// provider reported.
    async fn embed(&self, texts: &[String]) -> Result<(Vec<Vec<f64>>, Option<Usage>), CallError> {
        let body = json!({"model": self.model, "input": texts});
        let answer =
            self.client.post(&self.endpoint, "/embeddings", &body, |json| parse_embeddings(json, texts.len())).await?;
        tracing::debug!(texts = texts.len(), ms = answer.latency_ms, "embedded");
        Ok((answer.value, answer.usage))
    }
}

impl EmbeddingsBackend {
    /// The embedding of each text, in order, and what computing them cost (no call for an
    /// empty list).
    pub async fn vectors(
        &self,
        texts: &[String],
        pricing: &PricingTable,
    ) -> Result<(Vec<Vec<f64>>, Metering), CallError> {
        let mut metering = Metering::default();
        if texts.is_empty() {
            return Ok((Vec::new(), metering));
        }
        let (vectors, usage) = self.embed(texts).await?;
        metering.add_call(&self.model, usage, pricing);
        Ok((vectors, metering))
    }
}

/// Reads an embeddings answer: one finite vector per input, all of one length, placed by
/// `index` (each index exactly once).
pub(crate) fn parse_embeddings(body: &Value, expected: usize) -> Result<(Vec<Vec<f64>>, Option<Usage>), String> {
    let data = body.get("data").and_then(Value::as_array).ok_or("no `data` array")?;
    if data.len() != expected {
        return Err(format!("{} embeddings for {expected} inputs", data.len()));
    }
    let mut vectors: Vec<Option<Vec<f64>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = match item.get("index") {
            Some(index) => index.as_u64().ok_or(format!("data[{position}].index is not an index"))? as usize,
            None => position,
        };
        let values = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or(format!("data[{position}].embedding is not an array of numbers"))?;
        let vector: Vec<f64> = values
            .iter()
            .map(|v| v.as_f64().filter(|x| x.is_finite()))
            .collect::<Option<_>>()
            .ok_or(format!("data[{position}].embedding has a value that is not a finite number"))?;
        let slot = vectors.get_mut(index).ok_or(format!("data[{position}].index {index} is out of range"))?;
        if slot.replace(vector).is_some() {
            return Err(format!("index {index} appears twice"));
        }
    }
    let vectors: Vec<Vec<f64>> = vectors.into_iter().map(Option::unwrap_or_default).collect();
    if vectors.windows(2).any(|pair| pair[0].len() != pair[1].len()) || vectors.iter().any(Vec::is_empty) {
        return Err("embeddings differ in length or are empty".into());
    }
    let usage = body.get("usage").filter(|u| u.is_object()).map(|usage| {
        let tokens = usage.get("prompt_tokens").or_else(|| usage.get("total_tokens")).and_then(Value::as_u64);
        Usage { input_tokens: tokens.unwrap_or(0), ..Usage::default() }
    });
    Ok((vectors, usage))
}
