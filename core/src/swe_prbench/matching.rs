//! One-to-one matching of agent comments to human comments, final labels, and duplicate
//! clustering.
//!
//! Rules:
//! - **Stage 1**: every agent comment the judge labelled CONFIRMED forms a pair with the human
//!   comment the judge named. Pairs are sorted by actionability descending (a missing score
//!   sorts as 0), then cosine descending, then (Lightsout's tie-break) lower agent index, then
//!   lower human index, and taken greedily: a pair is taken when neither of its comments is
//!   taken yet.
//! - **Stage 2**: the agent comments still unmatched (under [`ProtocolReading::Harness`] all of
//!   them; under [`ProtocolReading::Paper`] only those the judge did not call FABRICATED) are
//!   paired with every human comment still unmatched. Each pair's [`affinity`] is kept when it
//!   is ≥ [`AFFINITY_THRESHOLD`]; kept pairs are taken greedily by affinity descending, ties
//!   broken by lower agent index, then lower human index.
//! - **Final labels** ([`final_labels`]): a matched agent comment is CONFIRMED; an unmatched one
//!   is FABRICATED if the judge said so, else PLAUSIBLE (so a judge-CONFIRMED comment that lost
//!   its human comment to a better pair ends PLAUSIBLE).
//! - **Duplicates** ([`cluster_duplicates`]): agent comments in order; each joins the first
//!   existing cluster whose seed (first member) it reaches at cosine ≥ [`DUPLICATE_THRESHOLD`],
//!   else it seeds a new cluster.
//! - Thresholds are compared with a tolerance of 1e-9 (Lightsout's choice) so that a value that
//!   is exactly the threshold on paper (0.15 + 0.15) is kept whatever the float rounding.

use serde::{Deserialize, Serialize};

use super::{JudgeLabel, Label, ProtocolReading};

/// Stage-2 pairs below this affinity are not matches.
pub const AFFINITY_THRESHOLD: f64 = 0.30;
/// Agent comments at or above this cosine to a cluster's seed are duplicates of it.
pub const DUPLICATE_THRESHOLD: f64 = 0.65;
/// Affinity bonus for the same file.
const SAME_FILE_BONUS: f64 = 0.15;
/// Affinity bonus for lines at most [`NEAR_LINES`] apart (same file).
const NEAR_LINE_BONUS: f64 = 0.10;
const NEAR_LINES: i64 = 8;
/// Affinity bonus for lines at most [`CLOSE_LINES`] (but more than [`NEAR_LINES`]) apart.
const CLOSE_LINE_BONUS: f64 = 0.05;
const CLOSE_LINES: i64 = 20;
const TOLERANCE: f64 = 1e-9;

/// Where a comment points.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Location {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<i64>,
}

/// Which stage made a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatchStage {
    /// Stage 1: the judge's CONFIRMED pair.
    Judge,
    /// Stage 2: affinity.
    Affinity,
}

/// An agent comment matched to a human comment (indices into the PR's lists).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MatchedPair {
    pub agent: usize,
    pub human: usize,
    pub stage: MatchStage,
    pub cosine: f64,
    pub affinity: f64,
}

/// Lightsout's path comparison: equal after trimming whitespace, quotes and backticks and
/// removing leading `./`; a git `a/` or `b/` prefix on one side is ignored when the rest equals
/// the other side.
pub(crate) fn same_file(a: &str, b: &str) -> bool {
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

/// Stage 2's affinity: cosine + 0.15 when both comments name the same file, + 0.10 when, in
/// that file, their lines are at most 8 apart (else + 0.05 at most 20 apart), clamped to
/// [0, 1]. Line bonuses need the same file and both lines (Lightsout's reading: lines in
/// different files are not close).
pub fn affinity(cosine: f64, agent: &Location, human: &Location) -> f64 {
    let mut value = cosine;
    if let (Some(a), Some(h)) = (&agent.file, &human.file) {
        if same_file(a, h) {
            value += SAME_FILE_BONUS;
            if let (Some(a), Some(h)) = (agent.line, human.line) {
                let distance = a.abs_diff(h);
                if distance <= NEAR_LINES as u64 {
                    value += NEAR_LINE_BONUS;
                } else if distance <= CLOSE_LINES as u64 {
                    value += CLOSE_LINE_BONUS;
                }
            }
        }
    }
    value.clamp(0.0, 1.0)
}

/// Stages 1 and 2 (see the module rules). `labels[a]` is the judge's label of agent comment
/// `a`; `cosines[a][h]` the similarity of agent comment `a` and human comment `h`. Pairs come
/// out in the order they were taken.
pub fn match_comments(
    agent: &[Location],
    labels: &[JudgeLabel],
    human: &[Location],
    cosines: &[Vec<f64>],
    reading: ProtocolReading,
) -> Vec<MatchedPair> {
    let cos = |a: usize, h: usize| cosines.get(a).and_then(|row| row.get(h)).copied().unwrap_or(0.0);
    let mut agent_taken = vec![false; agent.len()];
    let mut human_taken = vec![false; human.len()];
    let mut pairs = Vec::new();

    // Stage 1: the judge's pairs; a CONFIRMED label naming no (valid) human comment has none.
    let mut confirmed: Vec<(usize, usize, u8, f64)> = labels
        .iter()
        .enumerate()
        .take(agent.len())
        .filter(|(_, label)| label.label == Label::Confirmed)
        .filter_map(|(a, label)| {
            let h = label.human.filter(|h| *h < human.len())?;
            Some((a, h, label.actionability.unwrap_or(0), cos(a, h)))
        })
        .collect();
    confirmed.sort_by(|x, y| y.2.cmp(&x.2).then(y.3.total_cmp(&x.3)).then(x.0.cmp(&y.0)).then(x.1.cmp(&y.1)));
    for (a, h, _, cosine) in confirmed {
        if !agent_taken[a] && !human_taken[h] {
            agent_taken[a] = true;
            human_taken[h] = true;
            let affinity = affinity(cosine, &agent[a], &human[h]);
            pairs.push(MatchedPair { agent: a, human: h, stage: MatchStage::Judge, cosine, affinity });
        }
    }

    // Stage 2: affinity over what is left.
    let eligible = |a: usize| match reading {
        ProtocolReading::Harness => true,
        ProtocolReading::Paper => labels.get(a).is_none_or(|label| label.label != Label::Fabricated),
    };
    let mut candidates: Vec<(usize, usize, f64, f64)> = Vec::new();
    for a in (0..agent.len()).filter(|a| !agent_taken[*a] && eligible(*a)) {
        for h in (0..human.len()).filter(|h| !human_taken[*h]) {
            let cosine = cos(a, h);
            let affinity = affinity(cosine, &agent[a], &human[h]);
            if affinity >= AFFINITY_THRESHOLD - TOLERANCE {
                candidates.push((a, h, cosine, affinity));
            }
        }
    }
    candidates.sort_by(|x, y| y.3.total_cmp(&x.3).then(x.0.cmp(&y.0)).then(x.1.cmp(&y.1)));
    for (a, h, cosine, affinity) in candidates {
        if !agent_taken[a] && !human_taken[h] {
            agent_taken[a] = true;
            human_taken[h] = true;
            pairs.push(MatchedPair { agent: a, human: h, stage: MatchStage::Affinity, cosine, affinity });
        }
    }
    pairs
}

/// The final label of each of `count` agent comments (see the module rules). Without judge
/// labels (the judge fell back) every unmatched comment is PLAUSIBLE.
pub fn final_labels(count: usize, judged: Option<&[JudgeLabel]>, pairs: &[MatchedPair]) -> Vec<Label> {
    (0..count)
        .map(|a| {
            if pairs.iter().any(|pair| pair.agent == a) {
                Label::Confirmed
            } else if judged.and_then(|labels| labels.get(a)).is_some_and(|label| label.label == Label::Fabricated) {
                Label::Fabricated
            } else {
                Label::Plausible
            }
        })
        .collect()
}

/// The duplicate cluster of each agent comment (0, 1, … in order of their seeds); see the
/// module rules. `cosines[a][b]` is the similarity of agent comments `a` and `b`.
pub fn cluster_duplicates(cosines: &[Vec<f64>]) -> Vec<usize> {
    let mut seeds: Vec<usize> = Vec::new();
    let mut clusters = Vec::with_capacity(cosines.len());
    for (a, row) in cosines.iter().enumerate() {
        let cos = |seed: usize| row.get(seed).copied().unwrap_or(0.0);
        match seeds.iter().position(|seed| cos(*seed) >= DUPLICATE_THRESHOLD - TOLERANCE) {
            Some(cluster) => clusters.push(cluster),
            None => {
                clusters.push(seeds.len());
                seeds.push(a);
            }
        }
    }
    clusters
}
