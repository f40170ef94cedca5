//! Each departure changes its one rule and nothing with it off (the harness's own rules are
//! pinned by `core/tests/swe_prbench_golden.rs`).

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::agent::{AgentComment, AgentOutput};
use super::{evaluate_record, judge_output, Departures, Embedder, EvalInput, EvalResult, Scoring, Similarity};

struct Fixed(HashMap<&'static str, Vec<f64>>);

impl Embedder for Fixed {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f64>>, String> {
        texts.iter().map(|t| self.0.get(t).cloned().ok_or_else(|| format!("no vector for {t:?}"))).collect()
    }
}

fn human(id: &str, file: &str, line: i64, body: &str) -> Map<String, Value> {
    json!({"comment_id": id, "file": file, "line": line, "body": body}).as_object().unwrap().clone()
}

fn input(humans: Vec<Map<String, Value>>) -> EvalInput {
    EvalInput {
        task_id: "t".into(),
        pr_number: 1,
        repo: "o/t".into(),
        config_name: "config_A_diff_only".into(),
        rendered_context: String::new(),
        total_tokens: 0,
        pipeline_version: String::new(),
        difficulty: "Type1_Direct".into(),
        pr_type: String::new(),
        language: String::new(),
        diff_patch: String::new(),
        human_comments: humans,
        has_severity_annotations: false,
    }
}

fn agent(comments: &[(&str, &str, i64)]) -> AgentOutput {
    AgentOutput {
        raw_response: String::new(),
        comments: comments
            .iter()
            .enumerate()
            .map(|(i, (body, file, line))| AgentComment {
                comment_id: format!("t_config_A_diff_only_{i}"),
                body: body.to_string(),
                file_reference: Some(file.to_string()),
                line_reference: Some(*line),
                severity_claim: None,
                is_outside_diff: false,
            })
            .collect(),
        parse_success: true,
        parse_error: None,
    }
}

fn score(
    input: &EvalInput,
    agent: &AgentOutput,
    answer: &str,
    similarity: Similarity,
    departures: Departures,
) -> EvalResult {
    let judge = judge_output(Ok(answer), agent, &input.human_comments, &departures);
    evaluate_record(input, agent, &judge, &Scoring { similarity, departures, model: "a::judge=j" })
}

fn with(departure: fn(&mut Departures)) -> Departures {
    let mut departures = Departures::default();
    departure(&mut departures);
    departures
}

const NO_ENTRIES: &str = r#"{"agent_classifications": []}"#;

#[test]
fn normalised_paths_earn_the_same_file_bonus() {
    let vectors = Fixed(HashMap::from([("agent text", vec![1.0, 2.0]), ("human text", vec![1.0, 0.0])]));
    let input = input(vec![human("h1", "src/a.py", 10, "human text")]);
    let agent = agent(&[("agent text", "./src/a.py", 12)]);
    // cosine 1/√5 ≈ 0.447 ≥ 0.3 matches either way; make it need the bonus with a weaker one.
    let weak = Fixed(HashMap::from([("agent text", vec![1.0, 4.0]), ("human text", vec![1.0, 0.0])]));
    let harness = score(&input, &agent, NO_ENTRIES, Similarity::Embeddings(&weak), Departures::default());
    assert_eq!(harness.caught_human_comments, 0);
    let normalised =
        score(&input, &agent, NO_ENTRIES, Similarity::Embeddings(&weak), with(|d| d.normalise_paths = true));
    assert_eq!(normalised.caught_human_comments, 1);
    let strong = score(&input, &agent, NO_ENTRIES, Similarity::Embeddings(&vectors), Departures::default());
    assert_eq!(strong.caught_human_comments, 1);
}

#[test]
fn alignment_floor_clamps_negative_pairs() {
    let vectors = Fixed(HashMap::from([("agent text", vec![-1.0, 1.0]), ("human text", vec![1.0, 0.0])]));
    let input = input(vec![human("h1", "src/a.py", 10, "human text")]);
    let agent = agent(&[("agent text", "src/b.py", 90)]);
    let answer = r#"{"agent_classifications": [{"comment_id": "t_config_A_diff_only_0",
        "classification": "CONFIRMED", "matched_human_comment_id": "h1", "actionability_score": 4}]}"#;
    let harness = score(&input, &agent, answer, Similarity::Embeddings(&vectors), Departures::default());
    assert!((harness.semantic_alignment + std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-12);
    let floored = score(&input, &agent, answer, Similarity::Embeddings(&vectors), with(|d| d.alignment_floor = true));
    assert_eq!(floored.semantic_alignment, 0.0);
    assert!(floored.overall_score > harness.overall_score);
}

#[test]
fn lexical_cosine_replaces_jaccard() {
    let input = input(vec![human("h1", "x.py", 1, "cache miss")]);
    let agent = agent(&[("cache cache miss", "y.py", 500)]);
    let harness = score(&input, &agent, NO_ENTRIES, Similarity::Lexical, Departures::default());
    assert_eq!(harness.semantic_alignment, 1.0);
    let cosine = score(&input, &agent, NO_ENTRIES, Similarity::Lexical, with(|d| d.lexical_cosine = true));
    assert!((cosine.semantic_alignment - 3.0 / 10f64.sqrt()).abs() < 1e-12);
}

#[test]
fn paper_stage_two_leaves_fabricated_comments_unmatched() {
    let input = input(vec![human("h1", "x.py", 1, "the loop never ends")]);
    let agent = agent(&[("the loop never ends", "x.py", 1)]);
    let answer = r#"{"agent_classifications": [{"comment_id": "t_config_A_diff_only_0",
        "classification": "FABRICATED", "actionability_score": 2}]}"#;
    let harness = score(&input, &agent, answer, Similarity::Lexical, Departures::default());
    assert_eq!((harness.confirmed_count, harness.fabricated_count), (1, 0));
    let paper = score(&input, &agent, answer, Similarity::Lexical, with(|d| d.paper_stage_two = true));
    assert_eq!((paper.confirmed_count, paper.fabricated_count), (0, 1));
}

#[test]
fn incomplete_judge_answers_fall_back_only_when_asked() {
    let input = input(vec![human("h1", "x.py", 1, "alpha beta")]);
    let agent = agent(&[("gamma delta", "y.py", 1), ("epsilon", "y.py", 2)]);
    let partial = r#"{"agent_classifications": [{"comment_id": "t_config_A_diff_only_0",
        "classification": "PLAUSIBLE", "actionability_score": 5}]}"#;
    let harness = score(&input, &agent, partial, Similarity::Lexical, Departures::default());
    assert_eq!((harness.fallback_penalty, harness.judge_parse_fallback_used), (0.0, false));
    // (5 + 3 − 2) / 2 / 4: the missing entry counts 3.
    assert_eq!(harness.actionability_score, 0.75);
    let strict = with(|d| d.fall_back_on_incomplete_judge_answers = true);
    let fallen = score(&input, &agent, partial, Similarity::Lexical, strict);
    assert_eq!((fallen.fallback_penalty, fallen.judge_parse_fallback_used), (0.5, true));
    assert_eq!(fallen.actionability_score, 0.5);
    let complete = r#"{"agent_classifications": [
        {"comment_id": "t_config_A_diff_only_0", "classification": "PLAUSIBLE", "actionability_score": 5},
        {"comment_id": "t_config_A_diff_only_1", "classification": "PLAUSIBLE", "actionability_score": 5}]}"#;
    assert!(!score(&input, &agent, complete, Similarity::Lexical, strict).judge_parse_fallback_used);
}
