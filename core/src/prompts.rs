//! Review prompts given to agents. Variant ids hash a preset's name, not its text, so a trial
//! records the hash of the exact prompt it was given: results stay comparable only while it
//! matches.

use crate::api::{ContextConfig, PromptPreset, PromptRef};
use crate::dataset::Task;

/// The system message of every review prompt.
pub const REVIEWER_SYSTEM: &str = "You are an expert software engineer reviewing a pull request. \
You look for real defects: wrong logic, broken edge cases, security problems, resource leaks, concurrency bugs. \
You do not pad the review with style remarks.";

const DEFAULT_INSTRUCTIONS: &str = "Review the change below. Write a ranked list of findings, most severe first, \
as a numbered markdown list. Start each item with its severity in brackets ([P0] critical, [P1] important, \
[P2] minor) and the location as path:line, then explain the problem and why it matters. \
If you find nothing wrong, say so in one line.";

const SWE_PRBENCH_INSTRUCTIONS: &str = "You are reviewing a pull request. Identify the issues a careful human \
reviewer would raise. Return a JSON array of review comments, and nothing else. Each comment is an object \
{\"body\": string, \"file\": string, \"line\": integer, \"severity\": \"P0\" | \"P1\" | \"P2\"}. \
Return a JSON array even when it is empty.";

/// Appended to the `swe-prbench` prompt for the one retry the protocol allows when an answer
/// could not be parsed into comments.
pub const SWE_PRBENCH_STRICT_RETRY: &str = "Your previous answer could not be parsed. Answer with the JSON array \
only: no prose, no markdown fences. Each element is an object with the keys \"body\", \"file\", \"line\" and \
\"severity\" (\"P0\", \"P1\" or \"P2\"). If there is nothing to report, answer [].";

/// The user message for a task under a prompt. Inline prompts may use the placeholders
/// `{{title}}`, `{{description}}`, `{{diff}}` and `{{context}}`; without any, the task is appended.
pub fn review_prompt(prompt: &PromptRef, task: &Task, context: Option<ContextConfig>) -> String {
    let body = task_section(task, context);
    match (&prompt.preset, &prompt.inline) {
        (Some(PromptPreset::SwePrBench), _) => format!("{SWE_PRBENCH_INSTRUCTIONS}\n\n{body}"),
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
        Some(text) => text.clone(),
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
    format!("{}\n{AGENTIC_WORKSPACE_NOTE}\n", review_prompt(prompt, task, context))
}
