//! Text similarity as the reference harness computes it: cosines of sentence embeddings
//! (`all-mpnet-base-v2` in the harness), and, whenever embeddings are unavailable or fail, the
//! Jaccard overlap of the sets of lower-cased `[A-Za-z0-9_]+` tokens.

use std::collections::HashSet;

use lightsout_api::protocol::Departures;
use std::collections::{BTreeMap, HashMap};

/// Something that embeds texts (one vector per text, in order), or fails.
pub trait Embedder {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f64>>, String>;
}

/// Where similarities come from.
#[derive(Clone, Copy)]
pub enum Similarity<'a> {
    /// The harness without sentence-transformers: Jaccard everywhere.
    Lexical,
    /// Embeddings; any failure falls back to Jaccard for that computation, as the harness does.
    Embeddings(&'a dyn Embedder),
}

/// How one record is scored: similarity source, departures, and the `<agent>::judge=<judge>`
/// label of the results.
#[derive(Clone, Copy)]
pub struct Scoring<'a> {
    pub similarity: Similarity<'a>,
    pub departures: Departures,
    pub model: &'a str,
}

impl<'a> Scoring<'a> {
    /// Exactly the harness.
    pub fn harness(similarity: Similarity<'a>, model: &'a str) -> Scoring<'a> {
        Scoring { similarity, departures: Departures::default(), model }
    }

    /// The lexical similarity in force of every (`rows[i]`, `columns[j]`): Jaccard, or the
    /// term-count cosine when that departure is on. Each text is tokenised once.
    pub fn lexical_matrix(&self, rows: &[&str], columns: &[&str]) -> Vec<Vec<f64>> {
        if self.departures.lexical_cosine {
            return rows
                .iter()
                .map(|a| {
                    columns
                        .iter()
                        .map(|b| {
                            let vectors = lexical_vectors(&[a.to_string(), b.to_string()]);
                            term_cosine(&vectors[0], &vectors[1])
                        })
                        .collect()
                })
                .collect();
        }
        let row_tokens: Vec<HashSet<String>> = rows.iter().map(|t| tokens(t)).collect();
        let column_tokens: Vec<HashSet<String>> = columns.iter().map(|t| tokens(t)).collect();
        row_tokens.iter().map(|a| column_tokens.iter().map(|b| jaccard(a, b)).collect()).collect()
    }
}

fn tokens(text: &str) -> HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Jaccard of the token sets; 0 when either is empty.
pub fn lexical_similarity(a: &str, b: &str) -> f64 {
    jaccard(&tokens(a), &tokens(b))
}

fn jaccard(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    inter as f64 / union as f64
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// dot / (|a|·|b|), 0 when a norm is 0 (the harness's `_cosine`).
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let denom = norm(a) * norm(b);
    if denom == 0.0 {
        0.0
    } else {
        dot(a, b) / denom
    }
}

/// Rows normalised first, then the dot product (sentence-transformers' `util.cos_sim`, used by
/// the harness for semantic alignment); a zero row stays zero.
pub fn cos_sim(a: &[f64], b: &[f64]) -> f64 {
    let unit = |v: &[f64]| {
        let n = norm(v);
        let n = if n == 0.0 { 1.0 } else { n };
        v.iter().map(|x| x / n).collect::<Vec<_>>()
    };
    dot(&unit(a), &unit(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaccard_of_lowercased_word_tokens() {
        assert_eq!(lexical_similarity("Foo bar-baz", "foo BAZ qux"), 0.5);
        assert_eq!(lexical_similarity("", "foo"), 0.0);
        assert_eq!(lexical_similarity("a_b", "a b"), 0.0);
    }
}

/// Vectors computed beforehand (the run path embeds a record's texts in one asynchronous call,
/// [`texts_to_embed`]); a text without one fails, as an unavailable model does.
#[derive(Debug, Default)]
pub struct VectorTable(pub HashMap<String, Vec<f64>>);

impl Embedder for VectorTable {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f64>>, String> {
        texts.iter().map(|t| self.0.get(*t).cloned().ok_or_else(|| format!("no vector for {t:?}"))).collect()
    }
}

/// Every text [`super::evaluate_record`] may embed for a record: each agent and ground-truth
/// comment body as it is and stripped, once each, in a stable order.
pub fn texts_to_embed(input: &super::EvalInput, agent: &super::AgentOutput) -> Vec<String> {
    let human = input.human_comments.iter().map(|c| super::python::text_or_empty(c, "body"));
    let bodies: Vec<String> = agent.comments.iter().map(|c| c.body.clone()).chain(human).collect();
    let mut seen = HashSet::new();
    bodies
        .iter()
        .flat_map(|b| [b.clone(), super::python::strip(b).to_string()])
        .filter(|t| seen.insert(t.clone()))
        .collect()
}

// Term-count cosine, for the `lexical_cosine` departure (Lightsout's similarity before it
// followed the harness).

/// Cosine similarity; 0 when either vector is zero (or they differ in length).
pub fn term_cosine(a: &[f64], b: &[f64]) -> f64 {
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
