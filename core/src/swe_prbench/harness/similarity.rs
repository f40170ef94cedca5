//! Text similarity as the reference harness computes it: cosines of sentence embeddings
//! (`all-mpnet-base-v2` in the harness), and, whenever embeddings are unavailable or fail, the
//! Jaccard overlap of the sets of lower-cased `[A-Za-z0-9_]+` tokens.

use std::collections::HashSet;

use super::departures::Departures;
use crate::swe_prbench::{cosine as term_cosine, lexical_vectors};

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
