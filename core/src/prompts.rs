//! Review prompts given to agents. Variant ids hash a preset's name, not its text, so a trial
//! records the hash of the exact prompt it was given: results stay comparable only while it
//! matches.

use crate::dataset::Task;
use lightsout_api::{ContextConfig, PromptPreset, PromptRef};
use lightsout_swe_prbench::harness::prompts::{AGENT_RETRY_SUFFIX, AGENT_SYSTEM_PROMPT};

/// The system message of every review prompt.
pub const REVIEWER_SYSTEM: &str = "You are an expert software engineer reviewing a pull request. \
You look for real defects: wrong logic, broken edge cases, security problems, resource leaks, concurrency bugs. \
You do not pad the review with style remarks.";

const DEFAULT_INSTRUCTIONS: &str = "Review the change below. Write a ranked list of findings, most severe first, \
as a numbered markdown list. Start each item with its severity in brackets ([P0] critical, [P1] important, \
[P2] minor) and the location as path:line, then explain the problem and why it matters. \
If you find nothing wrong, say so in one line.";

/// The system message of a prompt, when it has one of its own: the `swe-prbench` preset's is the
/// reference harness's agent system prompt.
pub fn system_prompt(prompt: &PromptRef) -> Option<&'static str> {
    (prompt.preset == Some(PromptPreset::SwePrBench)).then_some(AGENT_SYSTEM_PROMPT)
}

/// The user message of the `swe-prbench` preset's parse retry: the first message with the
/// harness's retry suffix appended, no separator.
pub fn swe_prbench_retry(user: &str) -> String {
    format!("{user}{AGENT_RETRY_SUFFIX}")
}

/// The user message for a task under a prompt. Inline prompts may use the placeholders
/// `{{title}}`, `{{description}}`, `{{diff}}` and `{{context}}`; without any, the task is appended.
pub fn review_prompt(prompt: &PromptRef, task: &Task, context: Option<ContextConfig>) -> String {
    // The harness's user message is the context file's render, unchanged; a task without one
    // for the configuration is shown as any other.
    let rendered = task.contexts.get(&crate::dataset::swe_prbench::config_or_default(context));
    if let (Some(PromptPreset::SwePrBench), Some(rendered)) = (&prompt.preset, rendered) {
        return rendered.rendered.clone();
    }
    let body = task_section(task, context);
    match (&prompt.preset, &prompt.inline) {
        (Some(PromptPreset::SwePrBench), _) => format!("{AGENT_SYSTEM_PROMPT}\n\n{body}"),
        (Some(PromptPreset::Default), _) | (None, None) => format!("{DEFAULT_INSTRUCTIONS}\n\n{body}"),
        (None, Some(text)) => {
            let placeholders = ["{{title}}", "{{description}}", "{{diff}}", "{{context}}"];
            if placeholders.iter().any(|p| text.contains(p)) {
                text.replace("{{title}}", &task.title)
                    .replace("{{description}}", &task.description)
                    .replace("{{diff}}", &task.diff)
                    .replace("{{context}}", &body)
            } else {
                format!("{text}\n\n{body}")
            }
        }
    }
}

/// The task as the agent sees it: title, description, and either the SWE-PRBench context render
/// of the chosen configuration or the diff.
fn task_section(task: &Task, context: Option<ContextConfig>) -> String {
    let rendered = context.and_then(|c| task.contexts.get(&c));
    let change = match rendered {
        Some(context) => context.rendered.clone(),
        None => format!("Diff:\n```diff\n{}\n```", task.diff.trim_end()),
    };
    format!(
        "Repository: {}\nTitle: {}\nDescription:\n{}\n\n{}\n",
        task.repo,
        task.title,
        task.description.trim(),
        change
    )
}

/// Where an agentic harness finds the change and must leave its review.
pub const AGENTIC_WORKSPACE_NOTE: &str = "You are in the repository, with the change applied as uncommitted \
modifications (see `git diff`). The pull request's title, description and diff are also in ../pr/. You may read \
files and run commands, but do not modify the code. Write your review to a file named review.md in the current \
directory: that file is what will be evaluated.";

/// The task given to an agentic harness: the review prompt plus where to work and what to leave.
pub fn agentic_review_prompt(prompt: &PromptRef, task: &Task, context: Option<ContextConfig>) -> String {
    // An agentic harness has no system message of ours: the preset's goes first.
    let system = system_prompt(prompt).map(|s| format!("{}\n\n", s.trim())).unwrap_or_default();
    format!("{system}{}\n{AGENTIC_WORKSPACE_NOTE}\n", review_prompt(prompt, task, context))
}
