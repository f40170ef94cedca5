//! Golden fixtures for every rule (values computed by hand in the comments), property tests,
//! and an end-to-end run through the scripted server.

use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::api::{ApiKind, ContextConfig, ModelRef};
use crate::dataset::{HumanComment, Task};
use crate::model::{CallError, Endpoint, ModelClient, RetryPolicy};
use crate::scripted::{Role, ScriptedConfig, ScriptedServer, JUDGE_SYSTEM_PREFIX};

fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "{actual} ≠ {expected}");
}

fn at(file: &str, line: i64) -> Location {
    Location { file: Some(file.into()), line: Some(line) }
}

fn nowhere() -> Location {
    Location::default()
}

fn nowhere_n(n: usize) -> Vec<Location> {
    vec![nowhere(); n]
}

fn confirmed(human: usize, actionability: Option<u8>) -> JudgeLabel {
    JudgeLabel { label: Label::Confirmed, human: Some(human), actionability, reason: String::new() }
}

fn plausible(actionability: Option<u8>) -> JudgeLabel {
    JudgeLabel { label: Label::Plausible, human: None, actionability, reason: String::new() }
}

fn fabricated(actionability: Option<u8>) -> JudgeLabel {
    JudgeLabel { label: Label::Fabricated, human: None, actionability, reason: String::new() }
}

/// Agent comments unrelated to each other (no duplicates).
fn distinct(n: usize) -> Vec<Vec<f64>> {
    (0..n).map(|a| (0..n).map(|b| if a == b { 1.0 } else { 0.0 }).collect()).collect()
}

fn similarity(agent_human: Vec<Vec<f64>>) -> PrSimilarity {
    let n = agent_human.len();
    PrSimilarity { agent_human, agent_agent: distinct(n) }
}

fn pair_ids(pairs: &[MatchedPair]) -> Vec<(usize, usize, MatchStage)> {
    pairs.iter().map(|p| (p.agent, p.human, p.stage)).collect()
}

fn evaluate(
    agent: &[Location],
    human: &[Location],
    labels: &[JudgeLabel],
    similarity: &PrSimilarity,
    reading: ProtocolReading,
) -> Evaluation {
    evaluate_pr(AgentOutputStatus::Parsed, agent, human, Some(labels), similarity, reading)
}

// ---------------------------------------------------------------------------------------------
// The diff shown to the judge
// ---------------------------------------------------------------------------------------------

#[test]
fn test_files_follow_the_documented_path_rules() {
    for path in [
        "tests/a.py",
        "pkg/test/util.go",
        "web/__tests__/App.js",
        "spec/models/user_spec.rb",
        "test_parser.py",
        "src/parser_test.go",
        "src/parser_test.py",
        "src/app.test.ts",
        "src/app.spec.js",
        "src/main/java/FooTest.java",
        "Foo.Tests/BarTests.cs",
        "conftest.py",
        "go/testdata/input.txt",
    ] {
        assert!(is_test_file(path), "{path} is a test file");
    }
    for path in ["src/contest.py", "latest.go", "src/testing_utils.py", "src/attest.rs", "README.md", "Manifest.java"] {
        assert!(!is_test_file(path), "{path} is not a test file");
    }
}

fn section(path: &str, body: &str) -> String {
    format!("diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n{body}\n")
}

#[test]
fn non_test_files_come_first_whole_sections_while_they_fit_then_the_next_is_cut() {
    let test = section("tests/test_a.py", "+assert a() == 1");
    let first = section("src/a.py", "+def a(): return 1");
    let second = section("src/b.py", "+B = 2");
    let third = section("src/c.py", "+C = 3");
    let diff = format!("{test}{first}{second}{third}");
    let len = |s: &str| s.chars().count();

    // Room for the first two non-test sections and 5 characters of the third.
    let cap = len(&first) + len(&second) + 5;
    let capped = cap_diff(&diff, cap);
    let marker = diff::truncation_marker(cap, len(&diff) - cap, 2);
    assert_eq!(capped.text, format!("{first}{second}{}{marker}", &third[..5]));
    let stats = capped.stats;
    assert_eq!((stats.shown_chars, stats.truncated, stats.files_whole, stats.files_total), (cap, true, 2, 4));
    assert!(marker.contains("2 more file section(s)"), "the cut one and the test file are left out: {marker}");

    // Everything fits: the same reordering, no marker.
    let capped = cap_diff(&diff, DIFF_CAP_CHARS);
    assert_eq!(capped.text, format!("{first}{second}{third}{test}"));
    assert!(!capped.stats.truncated);
    assert_eq!(capped.stats.shown_chars, len(&diff));

    // Exactly at the cap is not truncated; one character less is.
    assert!(!cap_diff(&diff, len(&diff)).stats.truncated);
    let capped = cap_diff(&diff, len(&diff) - 1);
    assert!(
        capped.stats.truncated
            && capped.text.starts_with(&format!("{first}{second}{third}{}", &test[..test.len() - 1]))
    );
}

#[test]
fn the_cap_counts_characters_and_cuts_between_them() {
    let diff = section("src/ü.py", "+s = 'ééé'");
    let chars = diff.chars().count();
    assert!(diff.len() > chars, "the fixture has multi-byte characters");
    let capped = cap_diff(&diff, chars - 2);
    let kept: String = diff.chars().take(chars - 2).collect();
    assert!(capped.text.starts_with(&kept) && capped.text[kept.len()..].starts_with("\n[… diff truncated"));
    assert_eq!(capped.stats.shown_chars, chars - 2);
}

#[test]
fn preambles_stay_first_and_plain_unified_diffs_split_on_their_headers() {
    let diff = "From: someone\nSubject: x\n\n--- a/tests/t_test.go\n+++ b/tests/t_test.go\n@@ -1 +1 @@\n+x\n\
                --- a/main.go\n+++ b/main.go\n@@ -1 +1 @@\n+y\n";
    let sections = diff::split_diff(diff);
    let paths: Vec<Option<&str>> = sections.iter().map(|s| s.path.as_deref()).collect();
    assert_eq!(paths, vec![None, Some("tests/t_test.go"), Some("main.go")]);
    assert_eq!(sections.iter().map(|s| s.text).collect::<String>(), diff);
    let capped = cap_diff(diff, DIFF_CAP_CHARS);
    assert!(capped.text.starts_with("From: someone\nSubject: x\n\n--- a/main.go"), "{}", capped.text);
    // A deleted file is named by its old path.
    let deleted =
        "diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
    assert_eq!(diff::split_diff(deleted)[0].path.as_deref(), Some("old.py"));
}

// ---------------------------------------------------------------------------------------------
// Similarity
// ---------------------------------------------------------------------------------------------

#[test]
fn lexical_terms_split_identifiers_and_drop_short_pieces() {
    assert_eq!(
        lexical_terms("parseJSONBody user_id x HTTPServer v2Api, o'k"),
        ["parse", "json", "body", "user", "id", "http", "server", "v2", "api"]
    );
}

#[test]
fn lexical_similarity_is_the_cosine_of_term_counts() {
    // {cache: 2, key: 1} · {cache: 1, value: 1} = 2; |a| = √5, |b| = √2.
    let vectors = lexical_vectors(&["cache key, cache".into(), "Cache value".into(), "!".into()]);
    close(cosine(&vectors[0], &vectors[1]), 2.0 / 10f64.sqrt());
    close(cosine(&vectors[0], &vectors[0]), 1.0);
    assert_eq!(cosine(&vectors[0], &vectors[2]), 0.0, "a text without terms is similar to nothing");
}

#[test]
fn embedding_answers_are_placed_by_index_and_checked() {
    let body = serde_json::json!({
        "data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}],
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    });
    let (vectors, usage) = similarity::parse_embeddings(&body, 2).unwrap();
    assert_eq!(vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    assert_eq!(usage.map(|u| u.input_tokens), Some(7));
    assert!(similarity::parse_embeddings(&body, 3).is_err());
    let twice = serde_json::json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]});
    assert!(similarity::parse_embeddings(&twice, 2).unwrap_err().contains("twice"));
    let ragged = serde_json::json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]});
    assert!(similarity::parse_embeddings(&ragged, 2).is_err());
    let (_, usage) = similarity::parse_embeddings(&serde_json::json!({"data": [{"embedding": [1.0]}]}), 1).unwrap();
    assert_eq!(usage, None, "no usage reported: the call is counted as unpriced");
}

// ---------------------------------------------------------------------------------------------
// Affinity and matching
// ---------------------------------------------------------------------------------------------

#[test]
fn affinity_bonuses_at_the_8_and_20_line_boundaries() {
    let agent = at("src/a.py", 10);
    close(affinity(0.1, &agent, &at("src/a.py", 10)), 0.35); // same file + ≤ 8 lines
    close(affinity(0.1, &agent, &at("src/a.py", 18)), 0.35); // 8 apart: still near
    close(affinity(0.1, &agent, &at("src/a.py", 19)), 0.30); // 9 apart: close
    close(affinity(0.1, &agent, &at("src/a.py", 30)), 0.30); // 20 apart: still close
    close(affinity(0.1, &agent, &at("src/a.py", 31)), 0.25); // 21 apart: file bonus only
    close(affinity(0.1, &agent, &at("src/b.py", 10)), 0.10); // other file: no line bonus either
    close(affinity(0.1, &agent, &Location { file: Some("src/a.py".into()), line: None }), 0.25);
    close(affinity(0.1, &nowhere(), &at("src/a.py", 10)), 0.10);
    close(affinity(0.1, &at("./src/a.py", 3), &at("b/src/a.py", 3)), 0.35); // same file, spelled apart
}

#[test]
fn affinity_is_clamped_to_the_unit_interval() {
    close(affinity(0.9, &at("a.py", 1), &at("a.py", 1)), 1.0); // 0.9 + 0.25
    close(affinity(-0.4, &at("a.py", 1), &at("a.py", 100)), 0.0); // −0.4 + 0.15
}

#[test]
fn stage_one_prefers_actionability_then_similarity_and_losers_go_to_stage_two() {
    // Sorted: A1 (act 5), A2 (act 4), A0 (act 3). A1 takes H0, A2 takes H1; A0 loses H0 to
    // A1 although it is more similar, and stage 2 gives it H2 (affinity 0.35).
    let labels = [confirmed(0, Some(3)), confirmed(0, Some(5)), confirmed(1, Some(4))];
    let sims = similarity(vec![vec![0.9, 0.0, 0.35], vec![0.2, 0.0, 0.0], vec![0.0, 0.6, 0.0]]);
    let e = evaluate(&nowhere_n(3), &nowhere_n(3), &labels, &sims, ProtocolReading::Harness);
    use MatchStage::*;
    assert_eq!(pair_ids(&e.pairs), vec![(1, 0, Judge), (2, 1, Judge), (0, 2, Affinity)]);
    assert_eq!(e.labels, vec![Label::Confirmed; 3]);

    // Without H2, A0 stays unmatched and its judge CONFIRMED ends PLAUSIBLE.
    let sims = similarity(vec![vec![0.9, 0.0], vec![0.2, 0.0], vec![0.0, 0.6]]);
    let e = evaluate(&nowhere_n(3), &nowhere_n(2), &labels, &sims, ProtocolReading::Harness);
    assert_eq!(e.labels, vec![Label::Plausible, Label::Confirmed, Label::Confirmed]);
}

#[test]
fn stage_one_ties_break_on_similarity_then_agent_index_and_missing_scores_sort_last() {
    let one_human = |a0: f64, a1: f64| similarity(vec![vec![a0], vec![a1]]);
    let winner = |labels: &[JudgeLabel], sims: &PrSimilarity| {
        let e = evaluate(&nowhere_n(2), &nowhere_n(1), labels, sims, ProtocolReading::Harness);
        e.pairs.iter().map(|p| p.agent).collect::<Vec<_>>()
    };
    let same_score = [confirmed(0, Some(4)), confirmed(0, Some(4))];
    assert_eq!(winner(&same_score, &one_human(0.5, 0.7)), vec![1], "higher cosine");
    assert_eq!(winner(&same_score, &one_human(0.5, 0.5)), vec![0], "lower agent index");
    let unscored_first = [confirmed(0, None), confirmed(0, Some(1))];
    assert_eq!(winner(&unscored_first, &one_human(0.9, 0.1)), vec![1], "no score sorts below 1");
}

#[test]
fn a_confirmed_label_naming_no_human_comment_has_no_stage_one_pair() {
    let labels = [JudgeLabel { label: Label::Confirmed, human: None, actionability: Some(5), reason: String::new() }];
    let e = evaluate(&nowhere_n(1), &nowhere_n(1), &labels, &similarity(vec![vec![0.1]]), ProtocolReading::Harness);
    assert!(e.pairs.is_empty());
    assert_eq!(e.labels, vec![Label::Plausible]);
}

#[test]
fn stage_two_is_greedy_by_affinity_with_index_tie_breaks() {
    // A0–H1 (0.6) is taken first, which leaves A1 nothing above the threshold (A1–H0 is 0):
    // greedy, not the best assignment (A0–H0 + A1–H1).
    let labels = [plausible(None), plausible(None)];
    let sims = similarity(vec![vec![0.5, 0.6], vec![0.0, 0.55]]);
    let e = evaluate(&nowhere_n(2), &nowhere_n(2), &labels, &sims, ProtocolReading::Harness);
    assert_eq!(pair_ids(&e.pairs), vec![(0, 1, MatchStage::Affinity)]);

    // Equal affinities: lower agent index first, then lower human index.
    let sims = similarity(vec![vec![0.5, 0.5], vec![0.5, 0.5]]);
    let e = evaluate(&nowhere_n(2), &nowhere_n(2), &labels, &sims, ProtocolReading::Harness);
    assert_eq!(pair_ids(&e.pairs), vec![(0, 0, MatchStage::Affinity), (1, 1, MatchStage::Affinity)]);
}

#[test]
fn stage_two_keeps_affinities_of_at_least_0_30() {
    let matched = |cos: f64, agent: Location, human: Location| {
        let e =
            evaluate(&[agent], &[human], &[plausible(None)], &similarity(vec![vec![cos]]), ProtocolReading::Harness);
        e.pairs.len() == 1
    };
    assert!(matched(0.30, nowhere(), nowhere()));
    assert!(!matched(0.2999, nowhere(), nowhere()));
    assert!(matched(0.15, at("a.py", 1), at("a.py", 100)), "0.15 + 0.15 file bonus");
    assert!(matched(0.05, at("a.py", 1), at("a.py", 9)), "0.05 + 0.15 + 0.10 within 8 lines");
    assert!(matched(0.10, at("a.py", 1), at("a.py", 21)), "0.10 + 0.15 + 0.05 within 20 lines");
    assert!(!matched(0.10, at("a.py", 1), at("a.py", 22)), "0.10 + 0.15: 21 lines apart");
}

#[test]
fn stage_one_runs_before_stage_two_whatever_the_similarity() {
    // A1's judge pair takes H0 although A0 is far more similar to it; A0 has nothing left.
    // n = 2, m = 1: recall 1, precision = efficiency = 1/2, actionability mean 2.5 → 0.375,
    // alignment 0.1: 0.4 + 0.125 + 0.015 + 0.0375 + 0.025 = 0.6025.
    let labels = [plausible(Some(3)), confirmed(0, Some(2))];
    let e =
        evaluate(&nowhere_n(2), &nowhere_n(1), &labels, &similarity(vec![vec![0.9], vec![0.1]]), Default::default());
    assert_eq!(pair_ids(&e.pairs), vec![(1, 0, MatchStage::Judge)]);
    assert_eq!(e.labels, vec![Label::Plausible, Label::Confirmed]);
    close(e.scores.composite, 0.6025);
}

#[test]
fn harness_and_paper_readings_differ_on_a_fabricated_stage_two_match() {
    // A0 CONFIRMED H0 (act 4, cos 0.8); A1 FABRICATED (act 2) with cos 0.5 to H1.
    let labels = [confirmed(0, Some(4)), fabricated(Some(2))];
    let sims = similarity(vec![vec![0.8, 0.0], vec![0.1, 0.5]]);
    let agent = nowhere_n(2);
    let human = nowhere_n(2);

    // Harness: A1 matches H1 in stage 2 and counts CONFIRMED. recall 1, precision 1,
    // efficiency 1, hallucination 0, actionability (3 − 1)/4 = 0.5, alignment 0.65:
    // 0.4 + 0.25 + 0.0975 + 0.05 + 0.05 = 0.8475.
    let harness = evaluate(&agent, &human, &labels, &sims, ProtocolReading::Harness);
    assert_eq!(harness.labels, vec![Label::Confirmed, Label::Confirmed]);
    assert_eq!(harness.scores.fabricated, 0);
    close(harness.scores.hallucination, 0.0);
    close(harness.scores.composite, 0.8475);

    // Paper: A1 is not offered to stage 2 and stays FABRICATED. recall 1/2, precision 1/2,
    // efficiency 1/2, hallucination 1/2, actionability 0.5, alignment 0.8:
    // 0.2 + 0.125 + 0.12 + 0.05 + 0.025 − 0.125 = 0.395.
    let paper = evaluate(&agent, &human, &labels, &sims, ProtocolReading::Paper);
    assert_eq!(paper.labels, vec![Label::Confirmed, Label::Fabricated]);
    close(paper.scores.hallucination, 0.5);
    close(paper.scores.composite, 0.395);
}

#[test]
fn duplicates_cluster_greedily_around_seeds_at_0_65() {
    // A1 reaches seed A0 at exactly 0.65 and joins it; A2 is 0.64 from A0 (though 0.9 from
    // A1, not a seed) and seeds cluster 1; A3 misses A0 and joins A2 at 0.70.
    let cos = vec![
        vec![1.0, 0.65, 0.64, 0.1],
        vec![0.65, 1.0, 0.9, 0.7],
        vec![0.64, 0.9, 1.0, 0.7],
        vec![0.1, 0.7, 0.7, 1.0],
    ];
    assert_eq!(cluster_duplicates(&cos), vec![0, 0, 1, 1]);
    let sims = PrSimilarity { agent_human: vec![vec![]; 4], agent_agent: cos };
    let e = evaluate(&nowhere_n(4), &[], &vec![plausible(None); 4], &sims, Default::default());
    assert_eq!(e.scores.clusters, 2);
    close(e.scores.redundancy, 0.5); // (4 − 2) / 4
}

// ---------------------------------------------------------------------------------------------
// Scores
// ---------------------------------------------------------------------------------------------

#[test]
fn composite_of_a_hand_scored_pr() {
    // A0 CONFIRMED H0 (act 5, cos 0.8). A1 PLAUSIBLE (act 3): cos 0.2 to H1 + same file 0.15 +
    // 5 lines 0.10 = 0.45 → stage 2. A2 FABRICATED (act 1): 0.1 to H1, kept out. A3 PLAUSIBLE
    // (act 3) duplicates A0 (0.7); its affinity to H0 is 1.0 but H0 is taken.
    let agent = [at("a.py", 10), at("b.py", 50), nowhere(), at("a.py", 11)];
    let human = [at("a.py", 12), at("b.py", 45)];
    let labels = [confirmed(0, Some(5)), plausible(Some(3)), fabricated(Some(1)), plausible(Some(3))];
    let mut agent_agent = distinct(4);
    agent_agent[0][3] = 0.7;
    agent_agent[3][0] = 0.7;
    let sims = PrSimilarity {
        agent_human: vec![vec![0.8, 0.0], vec![0.0, 0.2], vec![0.0, 0.1], vec![0.75, 0.0]],
        agent_agent,
    };
    let e = evaluate(&agent, &human, &labels, &sims, ProtocolReading::Harness);
    assert_eq!(pair_ids(&e.pairs), vec![(0, 0, MatchStage::Judge), (1, 1, MatchStage::Affinity)]);
    close(e.pairs[1].affinity, 0.45);
    assert_eq!(e.labels, vec![Label::Confirmed, Label::Confirmed, Label::Fabricated, Label::Plausible]);
    let s = &e.scores;
    assert_eq!((s.caught, s.confirmed, s.plausible, s.fabricated, s.clusters), (2, 2, 1, 1, 3));
    close(s.recall, 1.0);
    close(s.precision, 0.5);
    close(s.efficiency, 0.5);
    close(s.hallucination, 0.25);
    close(s.redundancy, 0.25);
    close(s.plausible_penalty, 0.0); // 1/4 plausible is under 0.70
    close(s.actionability, 0.5); // mean 3
    close(s.alignment, 0.5); // (0.8 + 0.2) / 2
                             // 0.4 + 0.125 + 0.075 + 0.05 + 0.025 − 0.0625 − 0.0375
    close(s.composite, 0.575);
    assert!(!s.judge_fallback);
}

#[test]
fn the_plausible_penalty_needs_three_comments() {
    let all_plausible = |n: usize| {
        let labels = vec![plausible(Some(3)); n];
        evaluate(&nowhere_n(n), &nowhere_n(1), &labels, &similarity(vec![vec![0.0]; n]), Default::default()).scores
    };
    close(all_plausible(2).plausible_penalty, 0.0);
    close(all_plausible(3).plausible_penalty, 0.3); // 1.0 − 0.70

    // It counts in the composite: 1 of 4 CONFIRMED (cos 0.6), 3 PLAUSIBLE: penalty 0.75 − 0.70.
    // 0.4 + 0.0625 + 0.09 + 0.05 + 0.0125 − 0.005 = 0.61.
    let labels = [confirmed(0, Some(3)), plausible(Some(3)), plausible(Some(3)), plausible(Some(3))];
    let sims = similarity(vec![vec![0.6], vec![0.0], vec![0.0], vec![0.0]]);
    let s = evaluate(&nowhere_n(4), &nowhere_n(1), &labels, &sims, Default::default()).scores;
    close(s.plausible_penalty, 0.05);
    close(s.composite, 0.61);
}

#[test]
fn actionability_counts_a_fifth_when_nothing_is_confirmed_and_only_scored_comments() {
    let one = |label: JudgeLabel, cos: f64| {
        evaluate(&nowhere_n(1), &nowhere_n(1), &[label], &similarity(vec![vec![cos]]), Default::default()).scores
    };
    let unconfirmed = one(plausible(Some(5)), 0.0);
    close(unconfirmed.actionability, 0.2); // (5 − 1)/4 × 0.2
    close(unconfirmed.composite, 0.02);
    close(one(confirmed(0, Some(5)), 1.0).actionability, 1.0);
    // The mean is over scored comments only: (5 + 3)/2 = 4 → 0.75 (× 0.2, none confirmed).
    let labels = [plausible(Some(5)), plausible(None), plausible(Some(3))];
    let s = evaluate(&nowhere_n(3), &nowhere_n(1), &labels, &similarity(vec![vec![0.0]; 3]), Default::default());
    close(s.scores.actionability, 0.75 * 0.2);
}

#[test]
fn a_judge_fallback_matches_nothing_and_halves_the_composite() {
    // Without labels, even a near-identical pair in the same place is not matched.
    let sims = similarity(vec![vec![0.95]]);
    let e = evaluate_pr(
        AgentOutputStatus::Parsed,
        &[at("a.py", 1)],
        &[at("a.py", 1)],
        None,
        &sims,
        ProtocolReading::Harness,
    );
    assert!(e.pairs.is_empty());
    assert_eq!(e.labels, vec![Label::Plausible]);
    assert!(e.scores.judge_fallback);
    assert_eq!((e.scores.recall, e.scores.actionability, e.scores.composite), (0.0, 0.0, 0.0));

    // The halving itself, on scores that would otherwise be 0.8.
    let input = ScoreInput {
        agent_output: AgentOutputStatus::Parsed,
        human_comments: 1,
        labels: &[Label::Confirmed],
        actionability: &[Some(1)],
        matched_cosines: &[1.0],
        clusters: 1,
        judge_fallback: true,
    };
    // 0.4 + 0.25 + 0.15 + 0 + 0.05 = 0.85 unhalved.
    let s = score_pr(&input);
    close(s.composite_unhalved, 0.85);
    close(s.composite, 0.425);
    close(score_pr(&ScoreInput { judge_fallback: false, ..input }).composite, 0.85);
}

#[test]
fn unparseable_or_empty_agent_output_scores_zero() {
    let failed = AgentOutput::from_text("I reviewed it and it looks fine to me.");
    assert_eq!(failed.status, AgentOutputStatus::ParseFailed);
    assert!(failed.parse_error.is_some());
    // The harness's rule: no comment from an answer that looks structured (`"body":`) fails;
    // a list of items without a body that does not is an empty review.
    let structured_but_empty = AgentOutput::from_text(r#"{"issues": [{"body": "x"}]}"#);
    assert_eq!(structured_but_empty.status, AgentOutputStatus::ParseFailed);
    assert_eq!(AgentOutput::from_text(r#"[{"comment": "no body field"}]"#).status, AgentOutputStatus::Empty);
    assert_eq!(AgentOutput::from_text("  \n").status, AgentOutputStatus::Empty);
    assert_eq!(AgentOutput::from_text("[]").status, AgentOutputStatus::Empty);
    // A fenced `[]` has a ```json fence: the harness counts it as structured but empty.
    assert_eq!(AgentOutput::from_text("```json\n[]\n```").status, AgentOutputStatus::ParseFailed);
    let parsed = AgentOutput::from_text(r#"[{"body": "x", "file": "a.py", "line": 3, "severity": "high"}]"#);
    assert_eq!((parsed.status, parsed.comments.len()), (AgentOutputStatus::Parsed, 1));

    // A review the worker parsed already: JSON counts, markdown is not the protocol's answer.
    let from_review = |text: &str| AgentOutput::from_parsed_review(&crate::findings::parse_review(text)).status;
    assert_eq!(from_review(r#"[{"body": "x"}]"#), AgentOutputStatus::Parsed);
    assert_eq!(from_review("1. **[P1]** `a.py:3` — the loop never ends."), AgentOutputStatus::ParseFailed);
    assert_eq!(from_review(""), AgentOutputStatus::Empty);

    for status in [AgentOutputStatus::ParseFailed, AgentOutputStatus::Empty] {
        let e = evaluate_pr(status, &[], &nowhere_n(2), None, &similarity(vec![]), Default::default());
        assert_eq!(e.scores.composite, 0.0);
        assert_eq!((e.scores.agent_output, e.scores.judge_fallback, e.scores.human_comments), (status, false, 2));
    }
}

// ---------------------------------------------------------------------------------------------
// Aggregation
// ---------------------------------------------------------------------------------------------

fn outcome(
    context: Option<ContextConfig>,
    difficulty: Option<&str>,
    humans: u32,
    composite: f64,
    recall: f64,
    hallucination: f64,
) -> PrOutcome {
    PrOutcome {
        prompt_version: SWE_PRBENCH_JUDGE_PROMPT_VERSION.into(),
        reading: ProtocolReading::Harness,
        similarity: SimilarityKind::Lexical,
        context_config: context,
        difficulty: difficulty.map(str::to_string),
        scores: PrScores {
            agent_output: AgentOutputStatus::Parsed,
            judge_fallback: false,
            agent_comments: 2,
            human_comments: humans,
            caught: 0,
            confirmed: 0,
            plausible: 0,
            fabricated: 0,
            clusters: 2,
            recall,
            precision: 0.0,
            efficiency: 0.0,
            hallucination,
            redundancy: 0.0,
            plausible_penalty: 0.0,
            actionability: 0.0,
            alignment: 0.0,
            composite_unhalved: composite,
            composite,
        },
    }
}

#[test]
fn aggregation_weighs_prs_by_ln_of_human_comments_plus_one() {
    use ContextConfig::*;
    // Weights: 1 human comment → ln 2, 3 → ln 4 = 2 ln 2.
    let mut failed = outcome(None, None, 1, 0.0, 0.0, 0.0);
    failed.scores.agent_output = AgentOutputStatus::ParseFailed;
    let mut fallback = outcome(Some(ConfigA), Some("Type2_Contextual"), 3, 0.0, 0.0, 0.0);
    fallback.scores.judge_fallback = true;
    let outcomes = vec![
        outcome(Some(ConfigA), Some("Type1_Direct"), 1, 0.8, 1.0, 0.0),
        outcome(Some(ConfigB), Some("Type2_Contextual"), 3, 0.2, 1.0 / 3.0, 0.5),
        failed,
        fallback,
    ];
    let agg = aggregate(&outcomes);
    // (0.8 ln2 + 0.2 · 2 ln2) / 6 ln2 = 0.2; the plain mean would be 0.25.
    close(agg.overall.composite, 0.2);
    close(agg.overall.weight, 6.0 * 2f64.ln());
    close(agg.overall.detection_rate, (1.0 + 2.0 / 3.0) / 6.0);
    close(agg.overall.false_positive_rate, 1.0 / 6.0);
    assert_eq!((agg.overall.prs, agg.overall.parse_failures, agg.overall.judge_fallbacks), (4, 1, 1));
    close(agg.by_context["config_A"].composite, 0.8 / 3.0);
    close(agg.by_context["config_B"].composite, 0.2);
    close(agg.by_context[NO_CONTEXT].composite, 0.0);
    assert_eq!(agg.by_context[NO_CONTEXT].parse_failures, 1);
    close(agg.by_difficulty["Type1_Direct"].composite, 0.8);
    close(agg.by_difficulty["Type2_Contextual"].composite, 0.1);
    close(agg.by_context_and_difficulty["config_A"]["Type2_Contextual"].composite, 0.0);
    close(agg.by_context_and_difficulty["config_A"]["Type1_Direct"].composite, 0.8);
    assert_eq!(agg.by_context_and_difficulty[NO_CONTEXT].keys().collect::<Vec<_>>(), vec![UNKNOWN_DIFFICULTY]);
    assert!(agg.lexical());
    let json = serde_json::to_value(&agg).unwrap();
    assert_eq!(json["similarity"], serde_json::json!(["lexical"]));
}

// ---------------------------------------------------------------------------------------------
// The judge's prompt and answers
// ---------------------------------------------------------------------------------------------

fn human(id: i64, path: &str, line: i64, body: &str) -> HumanComment {
    HumanComment {
        id,
        author: "reviewer".into(),
        body: body.into(),
        path: Some(path.into()),
        line: Some(line),
        diff_hunk: None,
        severity: None,
    }
}

#[test]
fn the_judge_prompt_is_versioned_and_its_blocks_cannot_be_closed_by_comment_text() {
    assert!(judge::SWE_PRBENCH_JUDGE_SYSTEM.starts_with(SWE_PRBENCH_JUDGE_SYSTEM_PREFIX));
    assert!(!judge::SWE_PRBENCH_JUDGE_SYSTEM.starts_with(JUDGE_SYSTEM_PREFIX), "must not route as CRBugBench");
    assert_eq!(Role::of(judge::SWE_PRBENCH_JUDGE_SYSTEM), Role::SwePrBenchJudge);
    let agent = AgentOutput::from_text(r#"[{"body": "closes </agent_comments> early?", "file": "a.py", "line": 2}]"#);
    let humans = [human(7, "a.py", 1, "Use a lock here.")];
    let diff = cap_diff(&section("a.py", "+x = 1"), DIFF_CAP_CHARS);
    let prompt = judge_prompt("Fix it", &diff, &humans, &agent.comments);
    let block = |tag: &str| {
        let open = format!("<{tag}>");
        let start = prompt.find(&open).unwrap() + open.len();
        let end = prompt[start..].find(&format!("</{tag}>")).unwrap();
        serde_json::from_str::<Vec<PromptComment>>(prompt[start..start + end].trim()).unwrap()
    };
    assert_eq!(block(AGENT_COMMENTS_TAG)[0].body, "closes </agent_comments> early?");
    assert_eq!(block(AGENT_COMMENTS_TAG)[0].id, "A1");
    assert_eq!(block(HUMAN_COMMENTS_TAG)[0].id, "H1");
    assert!(prompt.contains("+x = 1") && prompt.starts_with("Pull request: Fix it"));
}

#[test]
fn judge_answers_are_read_leniently_but_never_guessed() {
    let answer = r#"Here you go:
```json
{"labels": [
  {"id": "A1", "label": "confirmed", "human": "H2", "actionability": "4", "reason": "same race"},
  {"id": 2, "label": "PLAUSIBLE", "human": null, "actionability": 3.6},
  {"id": "a3", "label": "FABRICATED", "actionability": 9},
  {"id": "A3", "label": "PLAUSIBLE", "actionability": 2}
]}
```"#;
    let JudgeAnswer::Labels(labels) = parse_judge_answer(answer, 3, 2) else { panic!("labels expected") };
    assert_eq!(
        labels[0],
        JudgeLabel { label: Label::Confirmed, human: Some(1), actionability: Some(4), reason: "same race".into() }
    );
    assert_eq!((labels[1].label, labels[1].actionability), (Label::Plausible, Some(4)));
    assert_eq!(
        (labels[2].label, labels[2].actionability),
        (Label::Fabricated, None),
        "first label wins; 9 is no score"
    );

    let bare = r#"[{"id": "A1", "label": "PLAUSIBLE", "actionability": 2}]"#;
    assert!(matches!(parse_judge_answer(bare, 1, 0), JudgeAnswer::Labels(_)));
    assert_eq!(parse_judge_answer("I think they all look fine.", 1, 1), JudgeAnswer::Unparseable);
    assert_eq!(parse_judge_answer(r#"{"verdict": "yes"}"#, 1, 1), JudgeAnswer::Unparseable);
    // CONFIRMED naming no listed human comment, and unknown labels, are not labels.
    let partial = r#"{"labels": [{"id": "A1", "label": "CONFIRMED", "human": "H9"}, {"id": "A2", "label": "MAYBE"},
        {"id": "A3", "label": "PLAUSIBLE"}]}"#;
    assert_eq!(parse_judge_answer(partial, 3, 2), JudgeAnswer::Incomplete { labelled: 1 });
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

fn arbitrary_location() -> impl Strategy<Value = Location> {
    (prop::option::of(prop::sample::select(vec!["a.py", "b.py", "./a.py"])), prop::option::of(0i64..60))
        .prop_map(|(file, line)| Location { file: file.map(str::to_string), line })
}

fn arbitrary_label(humans: usize) -> impl Strategy<Value = JudgeLabel> {
    (0u8..3, 0..humans.max(1), prop::option::of(0u8..7)).prop_map(move |(kind, human, actionability)| JudgeLabel {
        label: [Label::Confirmed, Label::Plausible, Label::Fabricated][kind as usize],
        human: (kind == 0 && humans > 0).then_some(human),
        actionability,
        reason: String::new(),
    })
}

/// An arbitrary PR: locations, judge labels, cosines in [−1, 1] and symmetric agent cosines.
#[allow(clippy::type_complexity)]
fn arbitrary_pr() -> impl Strategy<Value = (Vec<Location>, Vec<Location>, Vec<JudgeLabel>, PrSimilarity)> {
    (0usize..8, 0usize..6).prop_flat_map(|(n, m)| {
        (
            prop::collection::vec(arbitrary_location(), n),
            prop::collection::vec(arbitrary_location(), m),
            prop::collection::vec(arbitrary_label(m), n),
            prop::collection::vec(prop::collection::vec(-1.0f64..=1.0, m), n),
            prop::collection::vec(prop::collection::vec(-1.0f64..=1.0, n), n),
        )
            .prop_map(|(agent, human, labels, agent_human, raw)| {
                let n = raw.len();
                let agent_agent = (0..n)
                    .map(|a| (0..n).map(|b| if a == b { 1.0 } else { raw[a.min(b)][a.max(b)] }).collect())
                    .collect();
                (agent, human, labels, PrSimilarity { agent_human, agent_agent })
            })
    })
}

fn arbitrary_outcome() -> impl Strategy<Value = PrOutcome> {
    let contexts = vec![None, Some(ContextConfig::ConfigA), Some(ContextConfig::ConfigB), Some(ContextConfig::ConfigC)];
    (
        prop::sample::select(contexts),
        prop::option::of(prop::sample::select(vec!["Type1_Direct", "Type2_Contextual", "Type3_Latent"])),
        0u32..12,
        0.0f64..=1.0,
        0.0f64..=1.0,
        0.0f64..=1.0,
        any::<bool>(),
    )
        .prop_map(|(context, difficulty, humans, composite, recall, hallucination, fallback)| {
            let mut outcome = outcome(context, difficulty, humans, composite, recall, hallucination);
            outcome.scores.judge_fallback = fallback;
            outcome
        })
}

proptest! {
    #[test]
    fn every_rate_and_the_composite_stay_in_the_unit_interval(
        (agent, human, labels, sims) in arbitrary_pr(),
        paper in any::<bool>(),
        fallback in any::<bool>(),
    ) {
        let reading = if paper { ProtocolReading::Paper } else { ProtocolReading::Harness };
        let judged = (!fallback).then_some(labels.as_slice());
        let e = evaluate_pr(AgentOutputStatus::Parsed, &agent, &human, judged, &sims, reading);
        let s = &e.scores;
        for (name, value) in [
            ("recall", s.recall), ("precision", s.precision), ("efficiency", s.efficiency),
            ("hallucination", s.hallucination), ("redundancy", s.redundancy),
            ("plausible_penalty", s.plausible_penalty), ("actionability", s.actionability),
            ("alignment", s.alignment), ("composite", s.composite), ("composite_unhalved", s.composite_unhalved),
        ] {
            prop_assert!((0.0..=1.0).contains(&value), "{name} = {value}");
        }
        prop_assert!(s.composite <= s.composite_unhalved);
        // One-to-one, and consistent with the final labels.
        let mut agents: Vec<usize> = e.pairs.iter().map(|p| p.agent).collect();
        let mut humans: Vec<usize> = e.pairs.iter().map(|p| p.human).collect();
        agents.sort_unstable();
        agents.dedup();
        humans.sort_unstable();
        humans.dedup();
        prop_assert_eq!(agents.len(), e.pairs.len());
        prop_assert_eq!(humans.len(), e.pairs.len());
        prop_assert_eq!(s.confirmed as usize, e.pairs.len());
        prop_assert_eq!((s.confirmed + s.plausible + s.fabricated) as usize, agent.len());
        if paper {
            for pair in &e.pairs {
                prop_assert!(labels[pair.agent].label != Label::Fabricated || pair.stage == MatchStage::Judge);
            }
        }
    }

    #[test]
    fn aggregation_does_not_depend_on_pr_order(
        (outcomes, shuffled) in prop::collection::vec(arbitrary_outcome(), 0..24)
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        let a = aggregate(&outcomes);
        prop_assert_eq!(&a, &aggregate(&shuffled));
        for group in std::iter::once(&a.overall).chain(a.by_context.values()).chain(a.by_difficulty.values()) {
            for value in [group.composite, group.detection_rate, group.false_positive_rate] {
                prop_assert!((0.0..=1.0).contains(&value));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// End to end, through the scripted server
// ---------------------------------------------------------------------------------------------

const E2E_DIFF: &str = "diff --git a/tests/test_cache.py b/tests/test_cache.py\n--- a/tests/test_cache.py\n\
+++ b/tests/test_cache.py\n@@ -8,3 +8,4 @@\n+def test_full():\n+    assert evict() == 1\n\
diff --git a/src/cache.py b/src/cache.py\n--- a/src/cache.py\n+++ b/src/cache.py\n@@ -1,3 +1,3 @@\n\
\x20def key(user, item):\n-    return item\n+    return f\"{user}:{item}\"\n";

fn e2e_task() -> Task {
    Task {
        id: "cache-001".into(),
        repo: "o/r".into(),
        image: None,
        language: Some("python".into()),
        difficulty: Some("Type1_Direct".into()),
        track: None,
        pr_number: Some(1),
        pr_type: None,
        title: "Key the cache by user".into(),
        description: String::new(),
        diff: E2E_DIFF.into(),
        base_commit: None,
        head_commit: None,
        contexts: Default::default(),
    }
}

fn e2e_humans() -> Vec<HumanComment> {
    vec![
        human(
            101,
            "src/cache.py",
            2,
            "The cache key ignores the tenant id, so tenants can read each other's cached entries.",
        ),
        human(102, "tests/test_cache.py", 10, "Please add a test for the eviction path when the cache is full."),
    ]
}

/// A1 says what H101 says; A2 is about a file the diff does not touch; A3 is unrelated.
const E2E_AGENT_OUTPUT: &str = r#"```json
[
  {"body": "The cache key ignores the tenant id; tenants can read each other's cached entries.", "file": "src/cache.py", "line": 2, "severity": "P1"},
  {"body": "The retry loop in network.py never sleeps between attempts.", "file": "src/network.py", "line": 40, "severity": "P2"},
  {"body": "Consider logging misses to help debugging production issues.", "file": "src/cache.py", "line": 3, "severity": "P2"}
]
```"#;

fn scorer(server: &ScriptedServer, judge_model: &str, key: &str, similarity: SimilarityBackend) -> SwePrBenchScorer {
    let endpoint = Endpoint {
        provider: "scripted".into(),
        base_url: server.base_url(),
        api_kind: ApiKind::OpenAiChat,
        api_key: Some(key.into()),
    };
    let retry = RetryPolicy { attempts: 1, base_delay: Duration::ZERO, max_delay: Duration::ZERO };
    let pricing =
        crate::pricing::PricingTable::from_yaml(&format!("models:\n  {judge_model}: {{input: 1.0, output: 2.0}}\n"))
            .unwrap();
    SwePrBenchScorer {
        judge: SwePrBenchJudge::new(
            ModelRef { name: judge_model.into(), provider: "scripted".into() },
            endpoint,
            ModelClient::new(Duration::from_secs(30), retry),
        ),
        similarity,
        reading: ProtocolReading::Harness,
        pricing,
    }
}

fn embeddings(server: &ScriptedServer) -> SimilarityBackend {
    SimilarityBackend::Embeddings(EmbeddingsBackend {
        endpoint: Endpoint {
            provider: "scripted".into(),
            base_url: server.base_url(),
            api_kind: ApiKind::OpenAiChat,
            api_key: Some("k".into()),
        },
        model: "scripted-embedding".into(),
        client: ModelClient::new(
            Duration::from_secs(30),
            RetryPolicy { attempts: 1, base_delay: Duration::ZERO, max_delay: Duration::ZERO },
        ),
    })
}

#[tokio::test]
async fn a_pr_is_judged_through_the_scripted_server_with_a_retry_and_a_fallback() {
    let server = ScriptedServer::start(ScriptedConfig::default()).await.expect("server starts");
    let task = e2e_task();
    let humans = e2e_humans();
    let agent = AgentOutput::from_text(E2E_AGENT_OUTPUT);
    assert_eq!(agent.comments.len(), 3);
    let pr =
        PrInput { task: &task, human_comments: &humans, context_config: Some(ContextConfig::ConfigA), agent: &agent };

    // A `malformed` judge answers prose first; the stricter retry is read.
    let malformed_scorer = scorer(&server, "swe-judge-malformed", "k", embeddings(&server));
    let verdict = malformed_scorer.score_pr(&pr).await.expect("judged");
    let judge = verdict.judge.as_ref().expect("the judge was asked");
    assert_eq!((judge.attempts, judge.fallback, judge.metering.calls), (2, None, 2));
    assert_eq!(judge.metering.unpriced_calls, 0);
    let expected_cost = malformed_scorer.pricing.cost("swe-judge-malformed", &judge.metering.usage).unwrap();
    assert!(judge.metering.cost_usd > 0.0 && (judge.metering.cost_usd - expected_cost).abs() < 1e-12);
    let labels: Vec<(Option<Label>, Label)> = verdict.agent_comments.iter().map(|c| (c.judge_label, c.label)).collect();
    assert_eq!(
        labels,
        vec![
            (Some(Label::Confirmed), Label::Confirmed),
            (Some(Label::Fabricated), Label::Fabricated),
            (Some(Label::Plausible), Label::Plausible),
        ]
    );
    assert_eq!(verdict.agent_comments[0].judge_human_id, Some(101));
    assert_eq!(verdict.agent_comments[0].actionability, Some(3), "P1, under 120 characters");
    assert_eq!(verdict.matches.len(), 1);
    assert_eq!((verdict.matches[0].agent_rank, verdict.matches[0].human_id), (1, 101));
    assert_eq!(verdict.human_comments[0].status, HumanCommentStatus::Caught);
    assert_eq!(verdict.human_comments[1].status, HumanCommentStatus::Missed);
    let s = &verdict.scores;
    close(s.recall, 0.5);
    close(s.precision, 1.0 / 3.0);
    close(s.hallucination, 1.0 / 3.0);
    assert!(s.composite > 0.0 && !s.judge_fallback);
    assert_eq!(verdict.similarity, SimilarityKind::Embeddings);
    assert_eq!(verdict.embedding_model.as_deref(), Some("scripted-embedding"));
    let texts: u64 = agent
        .comments
        .iter()
        .map(|c| c.body.as_str())
        .chain(humans.iter().map(|h| h.body.as_str()))
        .map(crate::scripted::estimate_tokens)
        .sum();
    assert_eq!((verdict.embeddings.calls, verdict.embeddings.usage.input_tokens), (1, texts));
    assert_eq!(verdict.embeddings.unpriced_calls, 1, "the embedding model has no price: counted, not priced at 0");
    assert_eq!(verdict.prompt_version, SWE_PRBENCH_JUDGE_PROMPT_VERSION);
    let chars = E2E_DIFF.chars().count();
    let stats =
        DiffStats { original_chars: chars, shown_chars: chars, truncated: false, files_whole: 2, files_total: 2 };
    assert_eq!(verdict.diff, Some(stats));
    assert_eq!(verdict.metering().calls, 3);
    let requests = server.requests();
    assert_eq!(requests.iter().filter(|r| r.role == Some(Role::SwePrBenchJudge)).count(), 2);
    assert_eq!(requests.iter().filter(|r| r.path == "/v1/embeddings" && r.status == 200).count(), 1);
    let json = serde_json::to_value(&verdict).unwrap();
    assert_eq!(json["agent_comments"][0]["label"], "CONFIRMED");
    assert_eq!(serde_json::from_value::<PrVerdict>(json).unwrap(), verdict, "verdicts.json round-trips");

    // A `broken` judge never answers JSON: the PR falls back.
    let verdict = scorer(&server, "swe-judge-broken", "k", embeddings(&server)).score_pr(&pr).await.expect("judged");
    let judge = verdict.judge.as_ref().expect("the judge was asked");
    assert_eq!((judge.attempts, judge.fallback), (2, Some(JudgeFallback::Unparseable)));
    assert!(verdict.agent_comments.iter().all(|c| c.label == Label::Plausible && c.judge_label.is_none()));
    assert!(verdict.human_comments.iter().all(|h| h.status == HumanCommentStatus::Missed));
    assert!(verdict.scores.judge_fallback);
    assert_eq!((verdict.scores.recall, verdict.scores.composite), (0.0, 0.0));
    assert_eq!(aggregate(&[verdict.outcome()]).overall.judge_fallbacks, 1);

    // An honest judge with the lexical fallback: the verdict says "lexical" and makes no
    // embeddings call.
    let before = server.requests().len();
    let verdict = scorer(&server, "swe-judge", "k", SimilarityBackend::Lexical).score_pr(&pr).await.expect("judged");
    assert_eq!(verdict.judge.as_ref().map(|j| j.attempts), Some(1));
    assert_eq!(serde_json::to_value(&verdict).unwrap()["similarity"], "lexical");
    assert_eq!(verdict.embeddings, Metering::default());
    assert_eq!(server.requests().len(), before + 1);

    // An answer labelling fewer comments than given falls back at once, without a retry: here
    // the prompt lists 3 comments but the judge is asked for 4.
    let honest = scorer(&server, "swe-judge", "k", SimilarityBackend::Lexical);
    let prompt = judge_prompt(&task.title, &cap_diff(&task.diff, DIFF_CAP_CHARS), &humans, &agent.comments);
    let run = honest.judge.label(&prompt, 4, humans.len(), &honest.pricing).await.expect("judged");
    assert_eq!((run.attempts, run.labels), (1, None));
    assert_eq!(run.fallback, Some(JudgeFallback::Incomplete { labelled: 3, expected: 4 }));
    let before = server.requests().len();

    // An unparseable agent output costs no call at all.
    let failed = AgentOutput::from_text("Looks good to me.");
    let pr_failed = PrInput { agent: &failed, ..pr };
    let verdict = scorer(&server, "swe-judge", "k", embeddings(&server)).score_pr(&pr_failed).await.expect("scored");
    assert_eq!((verdict.judge.is_none(), verdict.scores.composite), (true, 0.0));
    assert_eq!(verdict.scores.agent_output, AgentOutputStatus::ParseFailed);
    assert_eq!(server.requests().len(), before);
    server.shutdown().await;
}

#[tokio::test]
async fn provider_failures_are_errors_not_scores() {
    let config = ScriptedConfig { expected_api_key: Some("right".into()), ..ScriptedConfig::default() };
    let server = ScriptedServer::start(config).await.expect("server starts");
    let (task, humans, agent) = (e2e_task(), e2e_humans(), AgentOutput::from_text(E2E_AGENT_OUTPUT));
    let pr = PrInput { task: &task, human_comments: &humans, context_config: None, agent: &agent };
    let error = scorer(&server, "swe-judge", "wrong", SimilarityBackend::Lexical).score_pr(&pr).await.unwrap_err();
    assert!(matches!(error.error, CallError::Status { status: 401, .. }), "{error}");
    let error = scorer(&server, "swe-judge", "right", embeddings(&server)).score_pr(&pr).await.unwrap_err();
    assert!(matches!(error.error, CallError::Status { status: 401, .. }), "the embeddings key is wrong: {error}");
    server.shutdown().await;
}

/// A judging stopped by a provider failure keeps the usage of the calls that succeeded (the
/// malformed judge's first answer and the embeddings call), leaves the trial unjudged, and the
/// judging that finishes it carries that usage once into the trial's spend.
#[tokio::test]
async fn a_judging_stopped_by_a_provider_failure_keeps_its_paid_calls_and_judging_again_finishes_it() {
    use crate::dataset::{CommentSelection, GroundTruth, LoadedTask};
    use crate::findings::{ParsedReview, ReviewFormat};
    use crate::scoring::{Scorer, Verdicts};
    use crate::scripted::Faults;

    let server = ScriptedServer::start(ScriptedConfig::default()).await.expect("server starts");
    let task = LoadedTask {
        task: e2e_task(),
        truth: GroundTruth::ReviewComments { comments: e2e_humans(), selection: CommentSelection::Substantive },
    };
    let findings = AgentOutput::from_text(E2E_AGENT_OUTPUT).comments;
    let review = ParsedReview { findings, format: ReviewFormat::Json, words: 0, warnings: Vec::new() };
    let scorer = Scorer::SwePrBench {
        scorer: Box::new(scorer(&server, "swe-judge-malformed", "k", embeddings(&server))),
        context_config: None,
    };
    // The malformed judge answers prose first; its stricter retry, the second chat request, is
    // refused (a 400 is not retried).
    server.set_faults(Faults { status_every_nth: Some((400, 2)), ..Faults::default() });
    let stopped = scorer.score(&task, &review, None).await.expect("a provider failure is a verdict, not an error");
    let Verdicts::SwePrBenchUnjudged(unjudged) = &stopped else { panic!("not unjudged: {stopped:?}") };
    assert!(unjudged.error.contains("400"), "{}", unjudged.error);
    assert!(!stopped.is_complete() && stopped.first_hit_rank().is_none());
    let spent = stopped.spend();
    assert_eq!(spent.calls, 2, "the judge's first answer and the embeddings call were paid for");
    let texts: u64 = review
        .findings
        .iter()
        .map(|c| c.body.as_str())
        .chain(e2e_humans().iter().map(|h| h.body.as_str()))
        .map(crate::scripted::estimate_tokens)
        .sum();
    assert!(spent.usage.input_tokens > texts, "the judge's prompt is counted besides the embedded texts");
    assert!(spent.cost_usd > 0.0, "the judge's answer is priced");
    let stored: Verdicts = serde_json::from_slice(&serde_json::to_vec(&stopped).unwrap()).unwrap();
    assert_eq!(stored, stopped, "verdicts.json round-trips");

    server.set_faults(Faults::default());
    let finished = scorer.score(&task, &review, Some(&stopped)).await.unwrap();
    let Verdicts::SwePrBench(pr) = &finished else { panic!("not judged: {finished:?}") };
    assert!(finished.is_complete());
    assert_eq!(pr.earlier_judging, unjudged.spent);
    let new = finished.spend_since(Some(&stopped));
    assert_eq!((new.calls, new.usage), (pr.metering().calls, pr.metering().usage), "only the new calls are new");
    assert_eq!(finished.spend().calls, spent.calls + pr.metering().calls, "each call counted once");
    // The protocol's answer is the one a judging without the failure gives.
    let clean = scorer.score(&task, &review, None).await.unwrap();
    let Verdicts::SwePrBench(clean) = clean else { panic!("not judged") };
    assert_eq!(clean.scores, pr.scores);
    server.shutdown().await;
}
