//! The scripted judges: the CRBugBench judge decides whether a finding matches a ground-truth
//! item from the fixtures' answer key, with a seeded error rate so that judge panels sometimes
//! disagree; the SWE-PRBench judge of Lightsout's own protocol labels a PR's agent comments by
//! word overlap ([`swe_prbench_judge_answer`]; the reference harness's protocol is
//! [`super::harness_judge`]'s).

use std::collections::BTreeSet;

use serde::Serialize;

use super::det::{normalize_ws, tagged_block, unit};
use super::fixtures::{self, Finding, Truth};

/// System prompts starting with this are judge requests.
pub const JUDGE_SYSTEM_PREFIX: &str = "You are a code review judge";
/// The non-JSON answer of `malformed` and `broken` judge models.
pub const PROSE_ANSWER: &str = "I think it's probably a match.";
/// Probability that a judge flips the answer key's verdict.
const JUDGE_ERROR_RATE: f64 = 0.08;
/// Minimum lexical overlap for a "yes" when the pair is not in the fixtures.
const JACCARD_THRESHOLD: f64 = 0.25;

#[derive(Debug, Serialize)]
struct Verdict {
    verdict: &'static str,
    reason: String,
}

/// Whether `model` answers prose instead of JSON on this attempt. `first_attempt` is whether
/// this (model, finding, ground truth) was never asked before.
pub fn answers_prose(model: &str, first_attempt: bool) -> bool {
    model.contains("broken") || (model.contains("malformed") && first_attempt)
}

/// The judge's answer: `{"verdict": "yes"|"no", "reason": "..."}`, or prose for
/// `malformed`/`broken` models (see [`answers_prose`]).
pub fn judge_answer(model: &str, prompt: &str, first_attempt: bool) -> String {
    if answers_prose(model, first_attempt) {
        return PROSE_ANSWER.to_string();
    }
    let verdict = decide(model, prompt);
    // A struct of two strings always serializes; the fallback only keeps this panic-free.
    serde_json::to_string(&verdict).unwrap_or_default()
}

/// Identifies one judged pair, for counting attempts (a retry of the same pair is not a first
/// attempt).
pub(crate) fn attempt_key(model: &str, prompt: &str) -> String {
    let finding = tagged_block(prompt, "finding").map(normalize_ws).unwrap_or_default();
    let truth = tagged_block(prompt, "ground_truth").map(normalize_ws).unwrap_or_default();
    format!("{model}\u{0}{finding}\u{0}{truth}")
}

fn decide(model: &str, prompt: &str) -> Verdict {
    let (Some(finding_block), Some(truth_block)) =
        (tagged_block(prompt, "finding"), tagged_block(prompt, "ground_truth"))
    else {
        return Verdict {
            verdict: "no",
            reason: "The request has no <finding> and <ground_truth> blocks to compare.".into(),
        };
    };
    let finding_text = normalize_ws(finding_block);
    let truth_text = normalize_ws(truth_block);
    let Some((task_id, finding)) = find_finding(&finding_text) else {
        return lexical(&finding_text, &truth_text);
    };
    let Some(truth) = find_truth(&truth_text, task_id) else {
        return lexical(&finding_text, &truth_text);
    };
    let matches = truth.task_id() == task_id
        && match truth {
            Truth::Bug { index, .. } => finding.identifies.iter().any(|id| *id == format!("b{index}")),
            Truth::Comment { id, .. } => finding.matches_comments.contains(&id),
        };
    let flipped = unit(&format!("{model}{}{}", finding.body, truth.text())) < JUDGE_ERROR_RATE;
    if matches != flipped {
        Verdict { verdict: "yes", reason: "The finding describes the same defect as the ground-truth issue.".into() }
    } else {
        Verdict { verdict: "no", reason: "The finding does not describe the ground-truth issue.".into() }
    }
}

/// The fixture finding quoted in the finding block (longest body wins), with its task id.
fn find_finding(finding_text: &str) -> Option<(&'static str, &'static Finding)> {
    fixtures::get()
        .scripted
        .iter()
        .flat_map(|task| task.findings.iter().map(move |f| (task.task_id.as_str(), f)))
        .filter(|(_, f)| contained(&f.normalized_body, finding_text))
        .max_by_key(|(_, f)| f.body.len())
}

/// The ground-truth item quoted in the ground-truth block, preferring the finding's own task,
/// then the longest text.
fn find_truth(truth_text: &str, task_id: &str) -> Option<Truth<'static>> {
    fixtures::get()
        .truths()
        .filter(|t| contained(t.normalized(), truth_text))
        .max_by_key(|t| (t.task_id() == task_id, t.text().len()))
}

/// Both sides are whitespace-normalised; empty fixture texts would match everything.
fn contained(normalized_fixture: &str, normalized_block: &str) -> bool {
    !normalized_fixture.is_empty() && normalized_block.contains(normalized_fixture)
}

/// Fallback for pairs outside the answer key: Jaccard overlap of the words of 3+ characters.
fn lexical(finding: &str, truth: &str) -> Verdict {
    let similarity = jaccard(finding, truth);
    let verdict = if similarity >= JACCARD_THRESHOLD { "yes" } else { "no" };
    Verdict { verdict, reason: format!("Word overlap between the finding and the ground truth is {similarity:.2}.") }
}

pub(crate) fn jaccard(a: &str, b: &str) -> f64 {
    let words = |text: &str| -> BTreeSet<String> {
        text.to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 3)
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (words(a), words(b));
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

// ---------------------------------------------------------------------------------------------
// The SWE-PRBench judge of Lightsout's own protocol (`lightsout_swe_prbench::judge_prompt`); the
// reference harness's protocol is `super::harness_judge`'s.
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A judge prompt in the shape of `lightsout_core::judge`'s template: ground truth (with a location
    /// line) first, then the finding, then a question that names the tags again.
    pub(crate) fn judge_prompt(finding: &str, truth: &str) -> String {
        format!(
            "<ground_truth>\n{truth}\nLocation: src/x.py:3\n</ground_truth>\n\n<finding>\n{finding}\n</finding>\n\n\
             Does the finding identify the bug in <ground_truth>? Answer with a JSON object only."
        )
    }

    /// A (finding body, truth text, expected truth) pair from the fixtures, one per polarity.
    pub(crate) fn fixture_pair(want_match: bool) -> (String, String) {
        let fx = fixtures::get();
        for task in &fx.scripted {
            for finding in &task.findings {
                for truth in fx.truths().filter(|t| t.task_id() == task.task_id) {
                    let is_match = match truth {
                        Truth::Bug { index, .. } => finding.identifies.contains(&format!("b{index}")),
                        Truth::Comment { id, .. } => finding.matches_comments.contains(&id),
                    };
                    if is_match == want_match {
                        return (finding.body.clone(), truth.text().to_string());
                    }
                }
            }
        }
        panic!("fixtures have no pair with match={want_match}");
    }

    /// A judge model name whose seeded error does not flip this pair.
    pub(crate) fn honest_judge(finding: &str, truth: &str) -> String {
        (0..)
            .map(|i| format!("judge-{i}"))
            .find(|m| unit(&format!("{m}{finding}{truth}")) >= JUDGE_ERROR_RATE)
            .unwrap_or_default()
    }

    fn verdict_of(answer: &str) -> String {
        let v: serde_json::Value = serde_json::from_str(answer).expect("judge answers JSON");
        assert!(v["reason"].is_string());
        v["verdict"].as_str().unwrap_or_default().to_string()
    }

    #[test]
    fn answer_key_decides_known_pairs() {
        for want in [true, false] {
            let (finding, truth) = fixture_pair(want);
            let model = honest_judge(&finding, &truth);
            // Re-wrapping the texts must not matter.
            let prompt = judge_prompt(&format!("  {}\n(file.py:3)", finding.replace(' ', "\n ")), &truth);
            assert_eq!(verdict_of(&judge_answer(&model, &prompt, true)), if want { "yes" } else { "no" });
        }
    }

    #[test]
    fn judge_errors_flip_about_eight_percent() {
        let (finding, truth) = fixture_pair(true);
        let prompt = judge_prompt(&finding, &truth);
        let flips = (0..1000).filter(|i| verdict_of(&judge_answer(&format!("j{i}"), &prompt, true)) == "no").count();
        assert!((40..=130).contains(&flips), "{flips} flips in 1000");
    }

    #[test]
    fn lexical_fallback_for_unknown_pairs() {
        let similar = judge_prompt(
            "The retry loop never sleeps between attempts, hammering the upstream server.",
            "Retry loop does not sleep between attempts and hammers the server.",
        );
        assert_eq!(verdict_of(&judge_answer("j", &similar, true)), "yes");
        let different = judge_prompt("Typo in the README heading.", "Integer overflow when summing balances.");
        assert_eq!(verdict_of(&judge_answer("j", &different, true)), "no");
        assert_eq!(verdict_of(&judge_answer("j", "no blocks at all", true)), "no");
    }
    #[test]
    fn malformed_and_broken_models() {
        let prompt = judge_prompt("a", "b");
        assert_eq!(judge_answer("judge-malformed", &prompt, true), PROSE_ANSWER);
        verdict_of(&judge_answer("judge-malformed", &prompt, false));
        assert_eq!(judge_answer("judge-broken", &prompt, false), PROSE_ANSWER);
    }
}
