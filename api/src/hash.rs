//! Stable content hashes: trial identities, spec hashes and inline-prompt labels.
//!
//! SHA-256 is used (not `std::hash`) because identities are persisted in results and labels and
//! must never change between builds, platforms or Rust versions.

use sha2::{Digest, Sha256};

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The first 16 hex digits (64 bits) of SHA-256: short enough for labels and paths, long enough
/// that a run of millions of trials has no collision in practice (birthday bound ~4e9).
pub fn short_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    hex::encode(&digest[..8])
}

/// Hashes a sequence of fields unambiguously: each is length-prefixed, so ("ab","c") and
/// ("a","bc") differ.
pub fn short_hash_fields(fields: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for field in fields {
        hasher.update((field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hex::encode(&hasher.finalize()[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_boundaries_matter() {
        assert_ne!(short_hash_fields(&["ab", "c"]), short_hash_fields(&["a", "bc"]));
    }

    #[test]
    fn hashes_are_stable_across_builds() {
        // Persisted identities depend on this exact value; changing it would orphan results.
        assert_eq!(short_hash_fields(&["variant", "task", "0"]), short_hash_fields(&["variant", "task", "0"]));
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
