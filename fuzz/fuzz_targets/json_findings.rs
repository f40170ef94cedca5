//! SWE-PRBench's JSON findings decoding: never a panic, never more than the published cap of
//! comments, ranks 1..n, every kept comment with a body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightsout_core::findings::{parse_json_findings, MAX_JSON_COMMENTS};

fuzz_target!(|text: &str| {
    if let Ok(findings) = parse_json_findings(text) {
        assert!(findings.len() <= MAX_JSON_COMMENTS, "{} findings kept", findings.len());
        for (index, finding) in findings.iter().enumerate() {
            assert_eq!(finding.rank as usize, index + 1);
            assert!(!finding.body.is_empty(), "a kept comment has a body");
        }
    }
});
