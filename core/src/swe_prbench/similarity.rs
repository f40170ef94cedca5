//! Semantic similarity between review comments: cosine of embeddings from an OpenAI-compatible
//! `/v1/embeddings` endpoint, or of lexical term-frequency vectors when none is configured.
//!
//! Rules:
//! - A PR's texts (agent comment bodies, then human comment bodies) are embedded in one call:
//!   `POST {base_url}/embeddings` with `{model, input: [..]}`, answered with
//!   `{data: [{embedding, index}], usage: {prompt_tokens}}`. The call is metered; an answer
//!   without `usage` counts as an unpriced call.
//! - Lexical similarity (the fallback): each text becomes a vector of term counts over the
//!   PR's vocabulary, terms per [`lexical_terms`]; the similarity is their cosine.
//! - Cosine of a zero vector is 0; cosines are clamped to [-1, 1] against rounding.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::Metering;
use crate::model::{CallError, Endpoint, ModelClient, Usage};
use crate::pricing::PricingTable;

/// Which similarity a verdict used; reports must say so when it is lexical.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SimilarityKind {
    /// Term-frequency cosine ([`lexical_terms`]): no embedding endpoint was configured.
    Lexical,
    /// Cosine of embeddings from the configured endpoint.
    Embeddings,
}

/// How comment similarity is computed.
#[derive(Debug, Clone)]
pub enum SimilarityBackend {
    Lexical,
    Embeddings(EmbeddingsBackend),
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

impl SimilarityBackend {
    pub fn kind(&self) -> SimilarityKind {
        match self {
            SimilarityBackend::Lexical => SimilarityKind::Lexical,
            SimilarityBackend::Embeddings(_) => SimilarityKind::Embeddings,
        }
    }

    /// The embedding model's name, when embeddings are used.
    pub fn model(&self) -> Option<&str> {
        match self {
            SimilarityBackend::Lexical => None,
            SimilarityBackend::Embeddings(backend) => Some(&backend.model),
        }
    }

    /// One vector per text, in order, and what computing them cost (nothing for lexical; no
    /// call for an empty list).
    pub async fn vectors(
        &self,
        texts: &[String],
        pricing: &PricingTable,
    ) -> Result<(Vec<Vec<f64>>, Metering), CallError> {
        let mut metering = Metering::default();
        match self {
            SimilarityBackend::Lexical => Ok((lexical_vectors(texts), metering)),
            SimilarityBackend::Embeddings(_) if texts.is_empty() => Ok((Vec::new(), metering)),
            SimilarityBackend::Embeddings(backend) => {
                let (vectors, usage) = backend.embed(texts).await?;
                metering.add_call(&backend.model, usage, pricing);
                Ok((vectors, metering))
            }
        }
    }
}

/// The cosines a PR's matching needs.
#[derive(Debug, Clone, PartialEq)]
pub struct PrSimilarity {
    /// `agent_human[a][h]`: agent comment `a` against human comment `h`.
    pub agent_human: Vec<Vec<f64>>,
    /// `agent_agent[a][b]`: between agent comments (for duplicate clustering).
    pub agent_agent: Vec<Vec<f64>>,
}

impl PrSimilarity {
    pub fn from_vectors(agent: &[Vec<f64>], human: &[Vec<f64>]) -> PrSimilarity {
        PrSimilarity {
            agent_human: agent.iter().map(|a| human.iter().map(|h| cosine(a, h)).collect()).collect(),
            agent_agent: agent.iter().map(|a| agent.iter().map(|b| cosine(a, b)).collect()).collect(),
        }
    }
}

/// Cosine similarity; 0 when either vector is zero (or they differ in length).
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let (na, nb) = (norm(a), norm(b));
    if na == 0.0 || nb == 0.0 || !dot.is_finite() {
        return 0.0;
    }
    (dot / (na * nb)).clamp(-1.0, 1.0)
}

/// The lexical similarity's terms: the text is split at every character that is not
/// alphanumeric (so `_`, punctuation and whitespace separate), each piece is split at camelCase
/// boundaries (`parseJSONBody` → `parse`, `JSON`, `Body`; a digit followed by an upper-case
/// letter also splits), lower-cased, and pieces shorter than 2 characters are dropped.
pub fn lexical_terms(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .flat_map(split_camel_case)
        .map(str::to_lowercase)
        .filter(|term| term.chars().count() >= 2)
        .collect()
}

/// `fooBar` → `foo`, `Bar`; `HTTPServer` → `HTTP`, `Server`; `v2Api` → `v2`, `Api`.
fn split_camel_case(word: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = word.char_indices().collect();
    let mut parts = Vec::new();
    let mut start = 0;
    for i in 1..chars.len() {
        let (at, current) = chars[i];
        let previous = chars[i - 1].1;
        let next_is_lower = chars.get(i + 1).is_some_and(|(_, c)| c.is_lowercase());
        let boundary = current.is_uppercase()
            && ((previous.is_lowercase() || previous.is_numeric()) || (previous.is_uppercase() && next_is_lower));
        if boundary {
            parts.push(&word[start..at]);
            start = at;
        }
    }
    if start < word.len() {
        parts.push(&word[start..]);
    }
    parts
}

/// Term-count vectors of `texts` over their joint vocabulary (in sorted term order).
pub fn lexical_vectors(texts: &[String]) -> Vec<Vec<f64>> {
    let counts: Vec<BTreeMap<String, f64>> = texts
        .iter()
        .map(|text| {
            let mut counts = BTreeMap::new();
            for term in lexical_terms(text) {
                *counts.entry(term).or_insert(0.0) += 1.0;
            }
            counts
        })
        .collect();
    let vocabulary: BTreeMap<&str, usize> = {
        let mut terms: Vec<&str> = counts.iter().flat_map(|c| c.keys().map(String::as_str)).collect();
        terms.sort_unstable();
        terms.dedup();
        terms.into_iter().enumerate().map(|(i, term)| (term, i)).collect()
    };
    counts
        .iter()
        .map(|text_counts| {
            let mut vector = vec![0.0; vocabulary.len()];
            for (term, count) in text_counts {
                vector[vocabulary[term.as_str()]] = *count;
            }
            vector
        })
        .collect()
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
