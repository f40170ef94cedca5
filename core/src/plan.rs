//! Trial planning: variants × tasks × context configurations × repeats → trials with stable
//! identities, longest first.
//!
//! A variant is one combination of the matrix axes (model, reasoning effort, harness, prompt).
//! A trial's identity hashes (variant, task, repeat) — and its context configuration on that
//! axis, see below — and nothing else: not its position, not the time, not the attempt. So
//! re-planning the same spec always finds the same trials and a resumed or restarted run never
//! duplicates or loses one (invariant 4).
//!
//! **Context configurations** (`matrix.contextConfigs`, SWE-PRBench) are an axis of the *trial*,
//! not of the variant: a trial is (variant, task in one configuration, repeat), and the
//! configuration is a fourth field of its identity hash. The agent is the same under every
//! configuration — only what it is shown of the task changes — so a variant's summary holds
//! all its configurations and gives the benchmark's per-configuration table
//! (`swe_prbench.report.by_config`), as the benchmark's harness reports one model over A, B and C;
//! a variant per configuration would split that table over as many variants and multiply
//! everything keyed by variant (names, harness installs, comparisons). Without the axis the hash
//! has its three fields, exactly as before the axis existed, so stored results keep their ids;
//! `agent.contextConfig` (one configuration for the whole run) is then not part of any identity.

use crate::dataset::Task;
use lightsout_api::hash::short_hash_fields;
use lightsout_api::variant::{context_axis, variants, Variant};
use lightsout_api::{ContextConfig, EvaluationRunSpec};

/// The stable identity of a trial of a run without `matrix.contextConfigs`.
pub fn trial_id(variant_id: &str, task_id: &str, repeat: u32) -> String {
    short_hash_fields(&[variant_id, task_id, &repeat.to_string()])
}

/// The stable identity of a trial: [`trial_id`] without a configuration of the
/// `matrix.contextConfigs` axis, and with one a hash of four fields, which never equals a
/// three-field hash (the fields are length-prefixed).
pub fn trial_id_in_context(variant_id: &str, task_id: &str, context: Option<ContextConfig>, repeat: u32) -> String {
    match context {
        None => trial_id(variant_id, task_id, repeat),
        Some(context) => short_hash_fields(&[variant_id, task_id, &repeat.to_string(), context.as_str()]),
    }
}

/// What past durations are kept and looked up by, besides the variant: the task, and the
/// configuration of the axis when the trial has one (config C shows far more than config A).
pub fn duration_key(task_id: &str, context: Option<ContextConfig>) -> std::borrow::Cow<'_, str> {
    match context {
        None => task_id.into(),
        Some(context) => format!("{task_id}\u{0}{}", context.as_str()).into(),
    }
}

/// One trial: indices into the plan's variants and the task list it was planned from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedTrial {
    pub id: String,
    pub variant: u32,
    pub task: u32,
    /// Its configuration of the `matrix.contextConfigs` axis, part of its identity; `None`
    /// without the axis. See [`PlannedTrial::context_config`] for the one the agent is given.
    pub context: Option<ContextConfig>,
    pub repeat: u32,
    /// Expected duration in milliseconds; the plan runs the longest first.
    pub expected_ms: u64,
}

impl PlannedTrial {
    /// The context configuration the trial's agent is given and its review is scored in: its
    /// axis value, or the run's `agent.contextConfig` (the two are never both set).
    pub fn context_config(&self, spec: &EvaluationRunSpec) -> Option<ContextConfig> {
        self.context.or(spec.agent.context_config)
    }
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub variants: Vec<Variant>,
    /// Longest expected first, so the last trials to start are short and nothing straggles.
    pub trials: Vec<PlannedTrial>,
}

/// Expected duration when nothing is known of past runs: a fixed start-up cost plus a cost per
/// byte of change to read. The absolute value matters only against known past durations.
pub fn estimate_ms(task: &Task) -> u64 {
    30_000 + task.expected_effort().saturating_mul(20)
}

/// [`estimate_ms`] for a trial of the context axis, which is shown the task's render of `context`
/// in place of the diff (see [`crate::prompts`]). Only the axis's trials are estimated by the
/// render: a run without the axis keeps the order it always had.
fn estimate_in_context_ms(task: &Task, context: Option<ContextConfig>) -> u64 {
    match context.and_then(|c| task.contexts.get(&c)) {
        Some(render) => 30_000 + (render.rendered.len() as u64 + task.description.len() as u64 / 4).saturating_mul(20),
        None => estimate_ms(task),
    }
}

/// Plans every (variant, task, context configuration, repeat). `past_ms` gives a measured
/// duration for a (variant id, [`duration_key`]) when an earlier run knows one; it takes
/// precedence over the size estimate.
pub fn plan(spec: &EvaluationRunSpec, tasks: &[Task], past_ms: impl Fn(&str, &str) -> Option<u64>) -> Plan {
    let variants = variants(spec);
    let contexts = context_axis(spec);
    let repeats = spec.matrix.repeats.max(1) as u32;
    let estimates: Vec<Vec<u64>> =
        tasks.iter().map(|task| contexts.iter().map(|c| estimate_in_context_ms(task, *c)).collect()).collect();
    let mut trials = Vec::with_capacity(variants.len() * tasks.len() * contexts.len() * repeats as usize);
    for (vi, variant) in variants.iter().enumerate() {
        for (ti, task) in tasks.iter().enumerate() {
            for (ci, &context) in contexts.iter().enumerate() {
                let expected_ms = past_ms(&variant.id, &duration_key(&task.id, context)).unwrap_or(estimates[ti][ci]);
                for repeat in 0..repeats {
                    trials.push(PlannedTrial {
                        id: trial_id_in_context(&variant.id, &task.id, context, repeat),
                        variant: vi as u32,
                        task: ti as u32,
                        context,
                        repeat,
                        expected_ms,
                    });
                }
            }
        }
    }
    // Ties break on the id so the order is a function of the spec and the tasks alone.
    trials.sort_unstable_by(|a, b| b.expected_ms.cmp(&a.expected_ms).then_with(|| a.id.cmp(&b.id)));
    Plan { variants, trials }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lightsout_api::validate::parse_run;

    const RUN: &str = r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {name: demo}
spec:
  dataset: {format: crbugbench, source: "file://x.jsonl"}
  agent: {harness: {name: single-shot, version: "1.0.0"}}
  matrix:
    models: [{name: a, provider: p}, {name: b, provider: p}]
    reasoningEfforts: [low, high]
    repeats: 2
  providers: {p: {baseUrl: "http://localhost", apiKind: openai-chat}}
  storage: {results: "file://r"}
"#;

    fn task(id: &str, diff_len: usize) -> Task {
        Task {
            id: id.into(),
            repo: "r".into(),
            image: None,
            language: None,
            difficulty: None,
            track: None,
            pr_number: None,
            pr_type: None,
            title: id.into(),
            description: String::new(),
            diff: "x".repeat(diff_len),
            base_commit: None,
            head_commit: None,
            contexts: Default::default(),
        }
    }

    #[test]
    fn the_matrix_expands_into_variants_times_tasks_times_repeats() {
        let spec = parse_run(RUN, "run").unwrap().spec;
        let tasks = vec![task("t1", 10), task("t2", 20), task("t3", 30)];
        let plan = plan(&spec, &tasks, |_, _| None);
        assert_eq!(plan.variants.len(), 4);
        assert_eq!(plan.variants[0].name, "a/low/single-shot@1.0.0/default");
        assert_eq!(plan.trials.len(), 4 * 3 * 2);
        let unique: std::collections::HashSet<_> = plan.trials.iter().map(|t| &t.id).collect();
        assert_eq!(unique.len(), plan.trials.len());
    }

    #[test]
    fn identities_do_not_depend_on_task_order_or_other_tasks() {
        let spec = parse_run(RUN, "run").unwrap().spec;
        let ids = |tasks: &[Task]| {
            let plan = plan(&spec, tasks, |_, _| None);
            let mut ids: Vec<(String, String)> = plan
                .trials
                .iter()
                .map(|t| (tasks[t.task as usize].id.clone(), t.id.clone()))
                .filter(|(task, _)| task == "t1")
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(ids(&[task("t1", 10), task("t2", 20)]), ids(&[task("t9", 5), task("t2", 20), task("t1", 10)]));
    }

    #[test]
    fn longest_expected_runs_first_and_history_wins() {
        let spec = parse_run(RUN, "run").unwrap().spec;
        let tasks = vec![task("small", 10), task("big", 5000)];
        let by_size = plan(&spec, &tasks, |_, _| None);
        assert_eq!(tasks[by_size.trials[0].task as usize].id, "big");
        let with_history = plan(&spec, &tasks, |_, task| (task == "small").then_some(10_000_000));
        assert_eq!(tasks[with_history.trials[0].task as usize].id, "small");
        assert!(with_history.trials.windows(2).all(|w| w[0].expected_ms >= w[1].expected_ms));
    }

    const SWE_RUN: &str = r#"
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata: {name: demo}
spec:
  dataset: {format: swe-prbench, source: "file://x.jsonl"}
  agent: {harness: {name: single-shot, version: "1.0.0"}}
  matrix:
    models: [{name: a, provider: p}, {name: b, provider: p}]
    contextConfigs: [config_A, config_B, config_C]
    repeats: 2
  providers: {p: {baseUrl: "http://localhost", apiKind: openai-chat}}
  storage: {results: "file://r"}
"#;

    fn swe_plan(text: &str, tasks: &[Task]) -> (EvaluationRunSpec, Plan) {
        let spec = parse_run(text, "run").unwrap().spec;
        let plan = plan(&spec, tasks, |_, _| None);
        (spec, plan)
    }

    #[test]
    fn the_context_axis_multiplies_the_trials_not_the_variants() {
        let tasks = vec![task("t1", 10), task("t2", 20), task("t3", 30)];
        let (spec, plan) = swe_plan(SWE_RUN, &tasks);
        assert_eq!(plan.variants.len(), 2, "a configuration is not a variant");
        assert_eq!(plan.trials.len(), 2 * 3 * 3 * 2);
        let unique: std::collections::HashSet<_> = plan.trials.iter().map(|t| &t.id).collect();
        assert_eq!(unique.len(), plan.trials.len());
        for context in [ContextConfig::ConfigA, ContextConfig::ConfigB, ContextConfig::ConfigC] {
            let of_context: Vec<_> = plan.trials.iter().filter(|t| t.context == Some(context)).collect();
            assert_eq!(of_context.len(), 2 * 3 * 2, "{context:?}");
            assert!(of_context.iter().all(|t| t.context_config(&spec) == Some(context)));
        }
    }

    #[test]
    fn a_trial_of_the_context_axis_has_its_configuration_in_its_identity() {
        let tasks = vec![task("t1", 10), task("t2", 20)];
        let (_, with_axis) = swe_plan(SWE_RUN, &tasks);
        let trial = with_axis.trials.iter().find(|t| t.context == Some(ContextConfig::ConfigB)).unwrap();
        let variant = &with_axis.variants[trial.variant as usize];
        let task_id = &tasks[trial.task as usize].id;
        assert_eq!(trial.id, trial_id_in_context(&variant.id, task_id, Some(ContextConfig::ConfigB), trial.repeat));
        assert_ne!(trial.id, trial_id(&variant.id, task_id, trial.repeat), "the configuration changes the identity");
        // Stable: the same spec planned again, over the tasks in another order, gives the same ids.
        let (_, again) = swe_plan(SWE_RUN, &[task("t2", 20), task("t1", 10)]);
        let ids = |plan: &Plan| plan.trials.iter().map(|t| t.id.clone()).collect::<std::collections::BTreeSet<_>>();
        assert_eq!(ids(&with_axis), ids(&again));
        // Dropping a configuration keeps the other configurations' trials.
        let (_, fewer) = swe_plan(&SWE_RUN.replace("config_A, config_B, config_C", "config_C, config_B"), &tasks);
        assert!(ids(&fewer).is_subset(&ids(&with_axis)));
        assert_eq!(fewer.trials.len(), with_axis.trials.len() / 3 * 2);
    }

    #[test]
    fn without_the_axis_identities_are_the_three_field_hash_even_with_agent_context_config() {
        let tasks = vec![task("t1", 10)];
        let single = SWE_RUN
            .replace("    contextConfigs: [config_A, config_B, config_C]\n", "")
            .replace("version: \"1.0.0\"}}", "version: \"1.0.0\"}, contextConfig: config_B}");
        let (spec, plan) = swe_plan(&single, &tasks);
        assert_eq!(plan.trials.len(), 2 * 2);
        for trial in &plan.trials {
            let variant = &plan.variants[trial.variant as usize];
            assert_eq!(trial.id, trial_id(&variant.id, "t1", trial.repeat));
            assert_eq!(trial.context, None);
            assert_eq!(trial.context_config(&spec), Some(ContextConfig::ConfigB), "agent.contextConfig applies");
        }
        // The identity of a trial without the axis, as stored results hold it.
        assert_eq!(trial_id("v", "t", 0), short_hash_fields(&["v", "t", "0"]));
        assert_eq!(trial_id_in_context("v", "t", None, 0), trial_id("v", "t", 0));
    }

    #[test]
    fn past_durations_are_per_configuration_and_the_axis_is_estimated_by_its_render() {
        let mut t = task("t1", 10);
        let context = |rendered: String| crate::dataset::ReviewContext {
            rendered,
            config_name: String::new(),
            repo: String::new(),
            pr_number: 0,
            total_tokens: 0,
            pipeline_version: String::new(),
        };
        t.contexts.insert(ContextConfig::ConfigA, context("a".repeat(100)));
        t.contexts.insert(ContextConfig::ConfigC, context("c".repeat(100_000)));
        let tasks = vec![t];
        let (_, by_size) = swe_plan(SWE_RUN, &tasks);
        assert_eq!(by_size.trials[0].context, Some(ContextConfig::ConfigC), "the biggest render runs first");
        let a_key = duration_key("t1", Some(ContextConfig::ConfigA));
        assert_ne!(a_key, duration_key("t1", None));
        let spec = parse_run(SWE_RUN, "run").unwrap().spec;
        let with_history = plan(&spec, &tasks, |_, key| (key == a_key).then_some(100_000_000));
        assert_eq!(with_history.trials[0].context, Some(ContextConfig::ConfigA), "history wins");
    }

    #[test]
    fn a_repeated_axis_value_is_one_variant() {
        let spec = parse_run(&RUN.replace("[low, high]", "[low, low]"), "run").unwrap().spec;
        assert_eq!(variants(&spec).len(), 2);
    }
}
