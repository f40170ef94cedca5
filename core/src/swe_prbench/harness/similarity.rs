//! Text similarity as the reference harness computes it: cosines of sentence embeddings
//! (`all-mpnet-base-v2` in the harness), and, whenever embeddings are unavailable or fail, the
//! Jaccard overlap of the sets of lower-cased `[A-Za-z0-9_]+` tokens.

use std::collections::HashSet;

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

fn tokens(text: &str) -> HashSet<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Jaccard of the token sets; 0 when either is empty.
pub fn lexical_similarity(a: &str, b: &str) -> f64 {
    let (ta, tb) = (tokens(a), tokens(b));
    if ta.is_empty() || tb.is_empty() {
        return 0.0;
    }
    let inter = ta.intersection(&tb).count();
    let union = ta.union(&tb).count();
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
