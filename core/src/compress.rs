//! Compressed artifacts. Trajectories and exchange logs are the large ones (every request and
//! answer of every turn), so they are stored zstd-compressed; `zstd -d` opens them.

/// The trial artifact holding `trajectory.jsonl`.
pub const TRAJECTORY_ARTIFACT: &str = "trajectory.jsonl.zst";
/// The trial artifact holding the proxy's `exchanges.jsonl`.
pub const EXCHANGES_ARTIFACT: &str = "exchanges.jsonl.zst";

/// Level 3, zstd's default: fast, and JSON lines compress ~10× at it.
const LEVEL: i32 = 3;

pub fn compress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::encode_all(bytes, LEVEL)
}

pub fn decompress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    zstd::decode_all(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_shrinks_json_lines() {
        let text = "{\"type\":\"tool_call\",\"name\":\"bash\",\"command\":\"ls -la\"}\n".repeat(500);
        let packed = super::compress(text.as_bytes()).unwrap();
        assert!(packed.len() * 10 < text.len());
        assert_eq!(super::decompress(&packed).unwrap(), text.as_bytes());
    }
}
