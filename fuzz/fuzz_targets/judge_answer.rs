//! Judge answers, both protocols: the per-finding yes/no verdict (`judge::parse_answer`) and
//! SWE-PRBench's label list (`parse_judge_answer`). The first two bytes choose how many agent
//! and human comments the SWE-PRBench judge was shown.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightsout_core::judge::{parse_answer, VoteValue};
use lightsout_core::swe_prbench::{parse_judge_answer, JudgeAnswer, Label};

fuzz_target!(|data: &[u8]| {
    let (counts, rest) = data.split_at(data.len().min(2));
    let agent_count = counts.first().map_or(0, |b| usize::from(b % 32));
    let human_count = counts.get(1).map_or(0, |b| usize::from(b % 32));
    let Ok(answer) = std::str::from_utf8(rest) else { return };

    if let Some((vote, _reason)) = parse_answer(answer) {
        assert_ne!(vote, VoteValue::Failed, "a parsed answer is a yes or a no");
    }
    match parse_judge_answer(answer, agent_count, human_count) {
        JudgeAnswer::Labels(labels) => {
            assert_eq!(labels.len(), agent_count, "one label per agent comment");
            for label in labels {
                match label.human {
                    Some(human) => assert!(label.label == Label::Confirmed && human < human_count),
                    None => assert_ne!(label.label, Label::Confirmed, "a confirmed label names its human comment"),
                }
            }
        }
        JudgeAnswer::Incomplete { labelled } => assert!(labelled < agent_count),
        JudgeAnswer::Unparseable => {}
    }
});
