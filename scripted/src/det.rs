//! Deterministic pseudo-randomness and text normalisation shared by the agent and the judge.
//!
//! Everything the scripted server "decides" is derived from SHA-256 of its inputs, so the same
//! request always gets the same answer on every platform and build.

use sha2::{Digest, Sha256};

/// The first 8 bytes of SHA-256(`seed`) as a big-endian integer.
pub(crate) fn hash_u64(seed: &str) -> u64 {
    let digest = Sha256::digest(seed.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// A uniform draw in [0, 1) from SHA-256(`seed`): the top 53 bits, exactly representable in f64.
pub(crate) fn unit(seed: &str) -> f64 {
    (hash_u64(seed) >> 11) as f64 / (1u64 << 53) as f64
}

/// Collapses every whitespace run to one space and trims, so fixture texts still match after a
/// prompt template re-wraps or re-indents them.
pub(crate) fn normalize_ws(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The text between the first `<tag>` and the following `</tag>`, trimmed.
pub(crate) fn tagged_block<'a>(text: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&close)?;
    Some(text[start..start + len].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_is_in_range_and_stable() {
        let a = unit("seed");
        assert!((0.0..1.0).contains(&a));
        assert_eq!(a, unit("seed"));
        assert_ne!(a, unit("seed2"));
    }

    #[test]
    fn blocks_and_whitespace() {
        let text = "x <finding>\n  a\n  b \n</finding> y";
        assert_eq!(tagged_block(text, "finding"), Some("a\n  b"));
        assert_eq!(tagged_block(text, "ground_truth"), None);
        assert_eq!(normalize_ws(" a\n\t b  "), "a b");
    }
}
