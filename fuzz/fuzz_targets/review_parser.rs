//! The review.md parser: any text an agent writes must parse (perhaps to no findings) without
//! panicking, with findings ranked 1..n in order.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightsout_core::findings::parse_review;

fuzz_target!(|text: &str| {
    let review = parse_review(text);
    for (index, finding) in review.findings.iter().enumerate() {
        assert_eq!(finding.rank as usize, index + 1, "findings are ranked 1..n in order");
    }
});
