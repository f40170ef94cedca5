//! One record's matching, metrics and result, as the reference harness computes them
//! (`matching.py:normalize_judge_alignment`, `scorer.py:compute_dimension_scores`,
//! `assembler.py`). Everything is keyed by comment id, as there: a repeated id keeps the last
//! comment (or judge entry) for lookups and its first position for order.
//!
//! - Stage 1: the judge's CONFIRMED entries naming a known agent comment and a ground-truth id,
//!   sorted by (actionability, similarity) descending, stable; greedy one-to-one.
//! - Stage 2: every agent comment left × every ground-truth comment left, whatever the judge
//!   said: affinity = similarity (+0.15 same non-empty file, exact string; then +0.10 lines ≤ 8
//!   apart, else +0.05 ≤ 20) clamped to [0, 1], kept at ≥ 0.3, sorted descending, stable,
//!   greedy one-to-one.
//! - Paired comments are CONFIRMED; others keep FABRICATED from the judge's last entry, all else
//!   is PLAUSIBLE. Duplicates: clusters at similarity ≥ 0.65 to a cluster's first member.
//! - Metrics and composite: see [`EvalResult`]'s fields.

use std::collections::HashMap;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::agent::{AgentComment, AgentOutput};
use super::layout::{EvalInput, CONFIG_C};
use super::python;
use super::similarity::{cos_sim, cosine, Scoring, Similarity};
use super::verdict::{human_id, JudgeOutput};

/// Stage-2 pairs below this affinity are not matches.
pub const AFFINITY_THRESHOLD: f64 = 0.3;
/// Agent comments at or above this similarity to a cluster's first member join it.
pub const DUPLICATE_THRESHOLD: f64 = 0.65;
/// Pairs at or above this similarity agree with the judge.
pub const AGREEMENT_THRESHOLD: f64 = 0.12;

/// A matched pair as `matched_pairs` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchedPair {
    pub agent_comment_id: String,
    pub human_comment_id: String,
    pub actionability: i64,
}

/// A comment id as `missed_comments` and `fabricated_comments` list it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommentRef {
    pub comment_id: String,
}

/// One record's result, field for field and in the order of the harness's `EvalResult`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    pub task_id: String,
    pub pr_number: i64,
    pub config_name: String,
    /// `<agent>::judge=<judge>`.
    pub model: String,
    pub pipeline_version: String,
    pub difficulty: String,
    pub language: String,
    /// Caught / ground-truth comments (= recall).
    pub detection_rate: f64,
    /// FABRICATED / agent comments (= hallucination_rate).
    pub false_positive_rate: f64,
    /// Pairs whose agent severity equals the human one, over pairs where both are set; −1 when
    /// none is, or when the ground truth has no severity.
    pub severity_accuracy: f64,
    /// (mean judge actionability per agent comment, 3 when unjudged, − 1) / 4.
    pub actionability_score: f64,
    /// Mean similarity of the pairs; no floor.
    pub semantic_alignment: f64,
    /// Outside-diff comments / agent comments, only for Type2/Type3 PRs in `config_C_full_context`.
    pub adjacent_detection_rate: f64,
    pub overall_score: f64,
    pub total_agent_comments: u32,
    pub confirmed_count: u32,
    pub plausible_count: u32,
    pub fabricated_count: u32,
    pub caught_human_comments: u32,
    pub missed_human_comments: u32,
    pub total_human_comments: u32,
    pub matched_pairs: Vec<MatchedPair>,
    pub missed_comments: Vec<CommentRef>,
    pub fabricated_comments: Vec<CommentRef>,
    /// Pairs / agent comments.
    pub precision: f64,
    pub recall: f64,
    pub f1_score: f64,
    pub hallucination_rate: f64,
    /// (agent comments − duplicate clusters) / agent comments.
    pub redundancy_penalty: f64,
    /// max(0, PLAUSIBLE share − 0.7) with at least 3 comments.
    pub plausible_penalty: f64,
    /// 0.5 when the judge fell back.
    pub fallback_penalty: f64,
    /// Pairs with similarity ≥ 0.12 / pairs.
    pub judge_alignment_agreement: f64,
    pub attempt_rate: f64,
    pub coverage: f64,
    /// ln(ground-truth comments + 1).
    pub difficulty_weight: f64,
    /// `no_attempt` without agent comments.
    pub failure_type: Option<String>,
    /// `hard` above 15 ground-truth comments, `medium` above 8, else `easy`.
    pub pr_difficulty_tag: String,
    pub agent_parse_success: bool,
    pub agent_parse_error: Option<String>,
    pub judge_parse_fallback_used: bool,
}

/// Similarity of every (agent id, human id); ids as given, unique.
struct PairTable(HashMap<(String, String), f64>);

impl PairTable {
    fn get(&self, agent: &str, human: &str) -> f64 {
        self.0.get(&(agent.to_string(), human.to_string())).copied().unwrap_or(0.0)
    }

    fn build(agent: &IndexMap<String, String>, human: &IndexMap<String, String>, scoring: &Scoring) -> PairTable {
        let mut out = HashMap::new();
        if agent.is_empty() || human.is_empty() {
            return PairTable(out);
        }
        let agent_texts: Vec<&str> = agent.values().map(String::as_str).collect();
        let human_texts: Vec<&str> = human.values().map(String::as_str).collect();
        let embedded = match scoring.similarity {
            Similarity::Embeddings(embedder) => embedder
                .encode(&agent_texts)
                .and_then(|a| embedder.encode(&human_texts).map(|h| (a, h)))
                .ok()
                .filter(|(a, h)| a.len() == agent_texts.len() && h.len() == human_texts.len()),
            Similarity::Lexical => None,
        };
        let lexical = if embedded.is_none() { scoring.lexical_matrix(&agent_texts, &human_texts) } else { Vec::new() };
        for (i, a_id) in agent.keys().enumerate() {
            for (j, h_id) in human.keys().enumerate() {
                let value = match &embedded {
                    Some((a, h)) => cosine(&a[i], &h[j]),
                    None => lexical[i][j],
                };
                out.insert((a_id.clone(), h_id.clone()), value);
            }
        }
        PairTable(out)
    }
}

/// The `normalise_paths` departure's comparison: equal after trimming whitespace, quotes and
/// backticks and removing leading `./`; a git `a/` or `b/` prefix on one side is ignored when
/// the rest equals the other side.
fn same_file(a: &str, b: &str) -> bool {
    let normalise = |path: &str| {
        let mut path = path.trim().trim_matches(|c| c == '`' || c == '"' || c == '\'');
        while let Some(rest) = path.strip_prefix("./") {
            path = rest;
        }
        path.to_string()
    };
    let (a, b) = (normalise(a), normalise(b));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let without_git_prefix = |p: &str| p.strip_prefix("a/").or_else(|| p.strip_prefix("b/")).map(str::to_string);
    a == b || without_git_prefix(&a).as_deref() == Some(&b) || without_git_prefix(&b).as_deref() == Some(&a)
}

fn affinity(similarity: f64, agent: &AgentComment, human: &Map<String, Value>, normalise_paths: bool) -> f64 {
    let mut score = similarity;
    let agent_file = agent.file_reference.clone().unwrap_or_default();
    let human_file = python::text_or_empty(human, "file");
    let same = if normalise_paths { same_file(&agent_file, &human_file) } else { agent_file == human_file };
    if !agent_file.is_empty() && !human_file.is_empty() && same {
        score += 0.15;
        let human_line = human.get("line").filter(|v| !v.is_null());
        if let (Some(a), Some(h)) = (agent.line_reference, human_line) {
            if let Some(h) = python::int_of(h) {
                let distance = (a - h).abs();
                if distance <= 8 {
                    score += 0.10;
                } else if distance <= 20 {
                    score += 0.05;
                }
            }
        }
    }
    score.clamp(0.0, 1.0)
}

/// What matching decides for one record (`NormalizedMatchView`).
struct Normalized {
    /// (agent id, human id, actionability, similarity) in pair order.
    pairs: Vec<(String, String, i64, f64)>,
    /// Final class per agent id, agent order.
    classes: IndexMap<String, &'static str>,
    /// CAUGHT / MISSED per distinct human id, first-occurrence order.
    caught: IndexMap<String, bool>,
    clusters: usize,
}

fn normalize(input: &EvalInput, agent: &AgentOutput, judge: &JudgeOutput, scoring: &Scoring) -> Normalized {
    let agent_by_id: IndexMap<String, &AgentComment> =
        agent.comments.iter().map(|c| (c.comment_id.clone(), c)).collect();
    let agent_text: IndexMap<String, String> =
        agent.comments.iter().map(|c| (c.comment_id.clone(), c.body.clone())).collect();
    let human_ids: Vec<String> = input.human_comments.iter().map(human_id).collect();
    let mut human_by_id: IndexMap<String, &Map<String, Value>> = IndexMap::new();
    let mut human_text: IndexMap<String, String> = IndexMap::new();
    for (id, comment) in human_ids.iter().zip(&input.human_comments) {
        human_by_id.insert(id.clone(), comment);
        let body = python::text_or_empty(comment, "body");
        human_text.insert(id.clone(), body);
    }
    let mut judged_class: HashMap<&str, &str> = HashMap::new();
    let mut judged_actionability: HashMap<&str, i64> = HashMap::new();
    for entry in &judge.agent_classifications {
        judged_class.insert(&entry.comment_id, &entry.classification);
        judged_actionability.insert(&entry.comment_id, entry.actionability_score);
    }
    let table = PairTable::build(&agent_text, &human_text, scoring);

    let mut stage1: Vec<(f64, i64, &str, &str)> = judge
        .agent_classifications
        .iter()
        .filter(|e| e.classification == "CONFIRMED")
        .filter_map(|e| {
            let human = e.matched_human_comment_id.as_deref().filter(|h| !h.is_empty())?;
            (agent_text.contains_key(&e.comment_id) && human_text.contains_key(human))
                .then(|| (table.get(&e.comment_id, human), e.actionability_score, e.comment_id.as_str(), human))
        })
        .collect();
    stage1.sort_by(|x, y| y.1.cmp(&x.1).then(y.0.total_cmp(&x.0)));
    let mut used_agents: Vec<&str> = Vec::new();
    let mut used_humans: Vec<&str> = Vec::new();
    let mut pairs: Vec<(String, String, i64, f64)> = Vec::new();
    for (sim, actionability, a_id, h_id) in stage1 {
        if used_agents.contains(&a_id) || used_humans.contains(&h_id) {
            continue;
        }
        used_agents.push(a_id);
        used_humans.push(h_id);
        pairs.push((a_id.to_string(), h_id.to_string(), actionability, sim));
    }

    let mut stage2: Vec<(f64, &str, &str)> = Vec::new();
    for a_id in agent_text.keys() {
        let judged_fabricated = judged_class.get(a_id.as_str()).is_some_and(|c| *c == "FABRICATED");
        if used_agents.contains(&a_id.as_str()) || (scoring.departures.paper_stage_two && judged_fabricated) {
            continue;
        }
        for h_id in &human_ids {
            if used_humans.contains(&h_id.as_str()) {
                continue;
            }
            let normalise_paths = scoring.departures.normalise_paths;
            let value = affinity(table.get(a_id, h_id), agent_by_id[a_id], human_by_id[h_id], normalise_paths);
            if value >= AFFINITY_THRESHOLD {
                stage2.push((value, a_id, h_id));
            }
        }
    }
    stage2.sort_by(|x, y| y.0.total_cmp(&x.0));
    for (_, a_id, h_id) in stage2 {
        if used_agents.contains(&a_id) || used_humans.contains(&h_id) {
            continue;
        }
        used_agents.push(a_id);
        used_humans.push(h_id);
        let actionability = judged_actionability.get(a_id).copied().unwrap_or(3);
        pairs.push((a_id.to_string(), h_id.to_string(), actionability, table.get(a_id, h_id)));
    }

    let classes = agent_text
        .keys()
        .map(|a_id| {
            let class = if pairs.iter().any(|p| &p.0 == a_id) {
                "CONFIRMED"
            } else if judged_class.get(a_id.as_str()).is_some_and(|c| c.to_uppercase() == "FABRICATED") {
                "FABRICATED"
            } else {
                "PLAUSIBLE"
            };
            (a_id.clone(), class)
        })
        .collect();
    let mut caught: IndexMap<String, bool> = human_ids.iter().map(|h| (h.clone(), false)).collect();
    for (_, h_id, _, _) in &pairs {
        if let Some(status) = caught.get_mut(h_id) {
            *status = true;
        }
    }
    Normalized { pairs, classes, caught, clusters: count_clusters(&agent.comments, scoring) }
}

fn count_clusters(comments: &[AgentComment], scoring: &Scoring) -> usize {
    let texts: Vec<&str> = comments.iter().map(|c| c.body.as_str()).collect();
    let embedded = match scoring.similarity {
        Similarity::Embeddings(embedder) => embedder.encode(&texts).ok().filter(|v| v.len() == texts.len()),
        Similarity::Lexical => None,
    };
    let lexical = if embedded.is_none() { scoring.lexical_matrix(&texts, &texts) } else { Vec::new() };
    let compare = |i: usize, j: usize| match &embedded {
        Some(vectors) => cosine(&vectors[i], &vectors[j]),
        None => lexical[i][j],
    };
    let mut firsts: Vec<usize> = Vec::new();
    for i in 0..texts.len() {
        if !firsts.iter().any(|first| compare(i, *first) >= DUPLICATE_THRESHOLD) {
            firsts.push(i);
        }
    }
    firsts.len()
}

/// The similarities used by alignment and agreement: with embeddings, each pair re-encoded
/// from stripped texts and compared by `cos_sim`, skipping pairs with an empty text (`None`);
/// any failure gives `Err(count)` where `count` is how many pairs had agreed before it.
fn pair_similarities(
    pairs: &[(String, String, i64, f64)],
    agent: &AgentOutput,
    input: &EvalInput,
    similarity: Similarity,
) -> Result<Vec<Option<f64>>, usize> {
    let Similarity::Embeddings(embedder) = similarity else { return Err(0) };
    let agent_map: HashMap<&str, &str> =
        agent.comments.iter().map(|c| (c.comment_id.as_str(), python::strip(&c.body))).collect();
    let mut human_map: HashMap<String, String> = HashMap::new();
    for comment in &input.human_comments {
        let body = python::text_or_empty(comment, "body");
        human_map.insert(human_id(comment), python::strip(&body).to_string());
    }
    let mut out = Vec::new();
    let mut agreed = 0;
    for (a_id, h_id, _, _) in pairs {
        let a_text = agent_map.get(a_id.as_str()).copied().unwrap_or_default();
        let h_text = human_map.get(h_id).map(String::as_str).unwrap_or_default();
        if a_text.is_empty() || h_text.is_empty() {
            out.push(None);
            continue;
        }
        let encode = |text: &str| embedder.encode(&[text]).ok().and_then(|mut v| v.pop());
        match (encode(a_text), encode(h_text)) {
            (Some(a), Some(h)) => {
                let sim = cos_sim(&a, &h);
                agreed += usize::from(sim >= AGREEMENT_THRESHOLD);
                out.push(Some(sim));
            }
            _ => return Err(agreed),
        }
    }
    Ok(out)
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

fn severity_accuracy(input: &EvalInput, agent: &AgentOutput, pairs: &[(String, String, i64, f64)]) -> f64 {
    let mut correct = 0;
    let mut total = 0;
    for (a_id, h_id, _, _) in pairs {
        // The harness looks the human severity up by the raw annotation id: only string ids match.
        let human =
            input.human_comments.iter().rev().find(|c| c.get("comment_id") == Some(&Value::String(h_id.clone())));
        let Some(human_severity) = human.and_then(|c| c.get("severity")).filter(|s| python::truthy(s)) else {
            continue;
        };
        let Some(claim) = agent.comments.iter().find(|c| &c.comment_id == a_id).and_then(|c| c.severity_claim.as_ref())
        else {
            continue;
        };
        total += 1;
        if claim.to_uppercase() == python::str_of(human_severity).to_uppercase() {
            correct += 1;
        }
    }
    if total > 0 {
        correct as f64 / total as f64
    } else {
        -1.0
    }
}

/// The scores of `scorer.py` for a record whose agent answer parsed.
struct Scores {
    recall: f64,
    precision: f64,
    f1: f64,
    hallucination: f64,
    redundancy: f64,
    plausible_penalty: f64,
    severity_accuracy: f64,
    actionability: f64,
    alignment: f64,
    adjacency: f64,
    fallback_penalty: f64,
    agreement: f64,
}

impl Scores {
    fn parse_failure() -> Scores {
        Scores {
            recall: 0.0,
            precision: 0.0,
            f1: 0.0,
            hallucination: 0.0,
            redundancy: 1.0,
            plausible_penalty: 1.0,
            severity_accuracy: -1.0,
            actionability: 0.0,
            alignment: 0.0,
            adjacency: 0.0,
            fallback_penalty: 0.0,
            agreement: 0.0,
        }
    }

    fn compute(
        input: &EvalInput,
        agent: &AgentOutput,
        judge: &JudgeOutput,
        normalized: &Normalized,
        scoring: &Scoring,
    ) -> Scores {
        let total_human = input.human_comments.len();
        let total_agent = agent.comments.len();
        let confirmed = normalized.pairs.len();
        let count = |class| normalized.classes.values().filter(|c| **c == class).count();
        let (fabricated, plausible) = (count("FABRICATED"), count("PLAUSIBLE"));
        let caught = normalized.caught.values().filter(|c| **c).count();
        let per_agent = |k: usize| if total_agent > 0 { k as f64 / total_agent as f64 } else { 0.0 };
        let recall = if total_human > 0 { caught as f64 / total_human as f64 } else { 0.0 };
        let precision = per_agent(confirmed);
        let f1 = if precision + recall > 0.0 { 2.0 * precision * recall / (precision + recall) } else { 0.0 };
        let plausible_penalty = if total_agent < 3 { 0.0 } else { (per_agent(plausible) - 0.7).max(0.0) };
        let actionability = if total_agent > 0 {
            let mut by_id: HashMap<&str, i64> = HashMap::new();
            for entry in &judge.agent_classifications {
                by_id.insert(&entry.comment_id, entry.actionability_score);
            }
            let raw: Vec<f64> =
                normalized.classes.keys().map(|id| by_id.get(id.as_str()).copied().unwrap_or(3) as f64).collect();
            (mean(&raw) - 1.0) / 4.0
        } else {
            0.0
        };
        let stored: Vec<f64> = normalized.pairs.iter().map(|p| p.3).collect();
        let (alignment, agreement) = if stored.is_empty() {
            (0.0, 0.0)
        } else {
            let agreed_stored = stored.iter().filter(|s| **s >= AGREEMENT_THRESHOLD).count();
            let floor = |s: f64| if scoring.departures.alignment_floor { s.max(0.0) } else { s };
            match pair_similarities(&normalized.pairs, agent, input, scoring.similarity) {
                Ok(sims) => {
                    let kept: Vec<f64> = sims.iter().flatten().copied().collect();
                    let floored: Vec<f64> = kept.iter().copied().map(floor).collect();
                    let agreed = kept.iter().filter(|s| **s >= AGREEMENT_THRESHOLD).count();
                    let alignment = if kept.is_empty() { 0.0 } else { mean(&floored) };
                    (alignment, agreed as f64 / stored.len() as f64)
                }
                Err(agreed_before) => {
                    let floored: Vec<f64> = stored.iter().copied().map(floor).collect();
                    (mean(&floored), (agreed_before + agreed_stored) as f64 / stored.len() as f64)
                }
            }
        };
        let adjacency = if matches!(input.difficulty.as_str(), "Type2_Contextual" | "Type3_Latent_Candidate")
            && input.config_name == CONFIG_C
            && total_agent > 0
        {
            per_agent(agent.comments.iter().filter(|c| c.is_outside_diff).count())
        } else {
            0.0
        };
        Scores {
            recall,
            precision,
            f1,
            hallucination: per_agent(fabricated),
            redundancy: per_agent(total_agent.saturating_sub(normalized.clusters)),
            plausible_penalty,
            severity_accuracy: if input.has_severity_annotations {
                severity_accuracy(input, agent, &normalized.pairs)
            } else {
                -1.0
            },
            actionability,
            alignment,
            adjacency,
            fallback_penalty: if judge.fallback_used() { 0.5 } else { 0.0 },
            agreement,
        }
    }

    /// `assembler.py:compute_overall_score` (efficiency equals precision).
    fn composite(&self, confirmed: usize) -> f64 {
        let actionability = if confirmed == 0 { self.actionability * 0.2 } else { self.actionability };
        let mut value = (0.4 * self.recall)
            + (0.25 * self.precision)
            + (0.15 * self.alignment)
            + (0.10 * actionability)
            + (0.05 * self.precision)
            - (0.25 * self.hallucination)
            - (0.15 * self.redundancy)
            - (0.10 * self.plausible_penalty);
        if self.fallback_penalty > 0.0 {
            value *= 0.5;
        }
        value.clamp(0.0, 1.0)
    }
}

/// One record's result from its input, agent output and judge output.
pub fn evaluate_record(input: &EvalInput, agent: &AgentOutput, judge: &JudgeOutput, scoring: &Scoring) -> EvalResult {
    let normalized = normalize(input, agent, judge, scoring);
    let total_agent = agent.comments.len();
    let total_human = input.human_comments.len();
    let scores = if agent.parse_success {
        Scores::compute(input, agent, judge, &normalized, scoring)
    } else {
        Scores::parse_failure()
    };
    let overall = if !agent.parse_success || total_agent == 0 { 0.0 } else { scores.composite(normalized.pairs.len()) };
    let count = |class| normalized.classes.values().filter(|c| **c == class).count() as u32;
    let caught = normalized.caught.values().filter(|c| **c).count() as u32;
    EvalResult {
        task_id: input.task_id.clone(),
        pr_number: input.pr_number,
        config_name: input.config_name.clone(),
        model: scoring.model.to_string(),
        pipeline_version: input.pipeline_version.clone(),
        difficulty: input.difficulty.clone(),
        language: input.language.clone(),
        detection_rate: scores.recall,
        false_positive_rate: scores.hallucination,
        severity_accuracy: scores.severity_accuracy,
        actionability_score: scores.actionability,
        semantic_alignment: scores.alignment,
        adjacent_detection_rate: scores.adjacency,
        overall_score: overall,
        total_agent_comments: total_agent as u32,
        confirmed_count: count("CONFIRMED"),
        plausible_count: count("PLAUSIBLE"),
        fabricated_count: count("FABRICATED"),
        caught_human_comments: caught,
        missed_human_comments: (total_human as u32).saturating_sub(caught),
        total_human_comments: total_human as u32,
        matched_pairs: normalized
            .pairs
            .iter()
            .map(|(a, h, actionability, _)| MatchedPair {
                agent_comment_id: a.clone(),
                human_comment_id: h.clone(),
                actionability: *actionability,
            })
            .collect(),
        missed_comments: normalized
            .caught
            .iter()
            .filter(|(_, caught)| !**caught)
            .map(|(id, _)| CommentRef { comment_id: id.clone() })
            .collect(),
        fabricated_comments: normalized
            .classes
            .iter()
            .filter(|(_, class)| **class == "FABRICATED")
            .map(|(id, _)| CommentRef { comment_id: id.clone() })
            .collect(),
        precision: scores.precision,
        recall: scores.recall,
        f1_score: scores.f1,
        hallucination_rate: scores.hallucination,
        redundancy_penalty: scores.redundancy,
        plausible_penalty: scores.plausible_penalty,
        fallback_penalty: scores.fallback_penalty,
        judge_alignment_agreement: scores.agreement,
        attempt_rate: if total_agent > 0 { 1.0 } else { 0.0 },
        coverage: if caught >= 1 { 1.0 } else { 0.0 },
        difficulty_weight: ((total_human + 1) as f64).ln(),
        failure_type: (total_agent == 0).then(|| "no_attempt".to_string()),
        pr_difficulty_tag: match total_human {
            n if n > 15 => "hard",
            n if n > 8 => "medium",
            _ => "easy",
        }
        .to_string(),
        agent_parse_success: agent.parse_success,
        agent_parse_error: agent.parse_error.clone(),
        judge_parse_fallback_used: judge.fallback_used(),
    }
}
