//! The scripted embedding model (`POST /v1/embeddings`, OpenAI's shape): deterministic hashed
//! bag-of-words vectors, so texts sharing words are similar and the same text always gets the
//! same vector.
//!
//! A text's words are its maximal runs of alphanumeric characters, lower-cased, of 2 or more
//! characters; each word adds 1 to dimension SHA-256(word) mod [`DIMENSIONS`]; the vector is
//! L2-normalised (a text without words is the zero vector). Usage counts ceil(chars / 4) tokens
//! per text, as every scripted answer does.

use serde_json::{json, Value};

use super::det::hash_u64;
use super::request;
use super::usage::estimate_tokens;

/// Length of every scripted embedding.
pub const DIMENSIONS: usize = 256;

/// A parsed embeddings request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EmbeddingsRequest {
    pub model: String,
    pub input: Vec<String>,
}

/// Parses `{model, input}`: `input` is a string or a non-empty array of strings (token arrays
/// are not supported and answered 400).
pub(crate) fn parse(body: &Value) -> Result<EmbeddingsRequest, String> {
    let body = request::object(body)?;
    let model = request::model(body)?;
    let input = match body.get("input") {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, item)| item.as_str().map(str::to_string).ok_or(format!("`input[{i}]` must be a string")))
            .collect::<Result<_, _>>()?,
        None | Some(Value::Null) => return Err("missing required field `input`".into()),
        Some(_) => return Err("`input` must be a string or a non-empty array of strings".into()),
    };
    Ok(EmbeddingsRequest { model, input })
}

/// The embedding of one text (see the module rules).
pub fn embed(text: &str) -> Vec<f64> {
    let mut vector = vec![0.0; DIMENSIONS];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 2) {
        let dimension = (hash_u64(&format!("embedding:{}", word.to_lowercase())) % DIMENSIONS as u64) as usize;
        vector[dimension] += 1.0;
    }
    let norm = vector.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

/// The answer: `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`.
pub(crate) fn answer(request: &EmbeddingsRequest) -> Value {
    let data: Vec<Value> = request
        .input
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embed(text)}))
        .collect();
    let tokens: u64 = request.input.iter().map(|text| estimate_tokens(text)).sum();
    json!({
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_normalised_deterministic_and_word_based() {
        let a = embed("The retry loop never sleeps");
        assert_eq!(a.len(), DIMENSIONS);
        assert!((a.iter().map(|x| x * x).sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(a, embed("the RETRY loop, never sleeps!"));
        assert_ne!(a, embed("Typo in the README heading"));
        assert!(embed("a ! ?").iter().all(|x| *x == 0.0), "no word of 2+ characters: the zero vector");
    }

    #[test]
    fn requests_and_answers() {
        let request = parse(&json!({"model": "emb", "input": ["ab cd", "efgh"]})).unwrap();
        let answer = answer(&request);
        assert_eq!(answer["data"][1]["index"], 1);
        assert_eq!(answer["data"][0]["embedding"].as_array().map(Vec::len), Some(DIMENSIONS));
        assert_eq!(answer["usage"]["prompt_tokens"], 3);
        assert_eq!(parse(&json!({"model": "emb", "input": "one"})).unwrap().input, vec!["one".to_string()]);
        assert!(parse(&json!({"model": "emb", "input": [[1, 2]]})).unwrap_err().contains("input[0]"));
        assert!(parse(&json!({"model": "emb"})).unwrap_err().contains("input"));
    }
}
