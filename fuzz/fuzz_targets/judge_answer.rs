//! Judge answers, both protocols: the per-finding yes/no verdict (`judge::parse_answer`) and the
//! SWE-PRBench judge's answer as the reference harness reads it (`harness::judge_output`). The
//! first two bytes choose how many agent and ground-truth comments the SWE-PRBench judge was shown.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightsout_core::judge::{parse_answer, VoteValue};
use lightsout_swe_prbench::harness::agent::AgentComment;
use lightsout_swe_prbench::harness::{judge_output, AgentOutput, Departures};

fuzz_target!(|data: &[u8]| {
    let (counts, rest) = data.split_at(data.len().min(2));
    let agent_count = counts.first().map_or(0, |b| usize::from(b % 32));
    let human_count = counts.get(1).map_or(0, |b| usize::from(b % 32));
    let Ok(answer) = std::str::from_utf8(rest) else { return };

    if let Some((vote, _reason)) = parse_answer(answer) {
        assert_ne!(vote, VoteValue::Failed, "a parsed answer is a yes or a no");
    }
    let comments = (0..agent_count)
        .map(|i| AgentComment {
            comment_id: format!("t_config_A_diff_only_{i}"),
            body: format!("comment {i}"),
            file_reference: None,
            line_reference: None,
            severity_claim: None,
            is_outside_diff: false,
        })
        .collect();
    let agent = AgentOutput { raw_response: String::new(), comments, parse_success: true, parse_error: None };
    let humans: Vec<serde_json::Map<String, serde_json::Value>> = (0..human_count)
        .map(|i| {
            let mut comment = serde_json::Map::new();
            comment.insert("comment_id".into(), format!("h{i}").into());
            comment
        })
        .collect();
    for departures in [Departures::default(), Departures { fall_back_on_incomplete_judge_answers: true, ..Default::default() }] {
        let out = judge_output(Ok(answer), &agent, &humans, &departures);
        for entry in &out.agent_classifications {
            assert!(matches!(entry.classification.as_str(), "CONFIRMED" | "PLAUSIBLE" | "FABRICATED"), "{entry:?}");
            assert!((1..=5).contains(&entry.actionability_score), "{entry:?}");
        }
        if out.fallback_used() {
            assert_eq!(out.agent_classifications.len(), agent_count, "a fallback classifies every comment");
            assert_eq!(out.human_comment_statuses.len(), human_count, "a fallback marks every human comment missed");
        }
        if departures.fall_back_on_incomplete_judge_answers && !out.fallback_used() {
            let classified = |id: &str| out.agent_classifications.iter().any(|e| e.comment_id == id);
            assert!(agent.comments.iter().all(|c| classified(&c.comment_id)), "a complete answer classifies every comment");
        }
    }
});
