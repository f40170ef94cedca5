//! The scripted models speaking the SWE-PRBench reference harness's protocol: its agent and
//! judge prompts over the three APIs, and the sample dataset's records run through the harness's
//! own agent parser and judge reader.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::*;
use lightsout_swe_prbench::harness::agent::agent_output_from_answer;
use lightsout_swe_prbench::harness::judge_message::judge_user_message;
use lightsout_swe_prbench::harness::prompts::{AGENT_RETRY_SUFFIX, AGENT_SYSTEM_PROMPT, JUDGE_SYSTEM_PROMPT};
use lightsout_swe_prbench::harness::{
    judge_output, run_agent, AgentCall, AgentCallKind, AgentOutput, BenchmarkLayout, Departures, EvalInput, JudgeOutput,
};

const KEY: &str = "sk-scripted-test";
const CONFIGS: [&str; 3] = ["config_A_diff_only", "config_B_with_file_content", "config_C_full_context"];

fn sample_layout() -> BenchmarkLayout {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../datasets/sample/swe-prbench");
    BenchmarkLayout::new(root.join("tasks.jsonl"), root.join("contexts"), root.join("annotations"))
}

/// Every sample record the harness can build (a task without an annotation file has none).
fn sample_inputs() -> Vec<EvalInput> {
    let layout = sample_layout();
    let task_ids = layout.discover_task_ids(&CONFIGS.map(String::from)).expect("sample tasks are discovered");
    let inputs: Vec<EvalInput> = task_ids
        .iter()
        .flat_map(|task_id| CONFIGS.iter().filter_map(|config| layout.load_eval_input(task_id, config).ok()))
        .collect();
    assert!(inputs.len() >= 9, "only {} sample records load", inputs.len());
    inputs
}

fn sample_input(task_id: &str) -> EvalInput {
    sample_layout().load_eval_input(task_id, "config_A_diff_only").expect("the sample record loads")
}

/// The harness's agent run against the scripted agent, and the calls it made.
fn run_scripted_agent(model: &str, input: &EvalInput) -> (AgentOutput, Vec<AgentCallKind>) {
    let mut kinds = Vec::new();
    let output = futures::executor::block_on(run_agent(input, 4000, |call: AgentCall| {
        kinds.push(call.kind);
        let user = match call.kind {
            AgentCallKind::First => input.rendered_context.clone(),
            AgentCallKind::Retry => format!("{}{AGENT_RETRY_SUFFIX}", input.rendered_context),
        };
        std::future::ready(Ok::<_, std::convert::Infallible>(Ok(harness_agent_answer(model, None, &user))))
    }))
    .unwrap_or_else(|never| match never {});
    (output, kinds)
}

fn strict_judge_output(answer: &str, agent: &AgentOutput, input: &EvalInput) -> JudgeOutput {
    let strict = Departures { fall_back_on_incomplete_judge_answers: true, ..Departures::default() };
    judge_output(Ok(answer), agent, &input.human_comments, &strict)
}

#[test]
fn sample_records_run_through_the_harness_parsers_without_fallbacks() {
    let mut confirmed = 0;
    for input in sample_inputs() {
        let (agent, kinds) = run_scripted_agent("gpt-test", &input);
        assert!(agent.parse_success, "{} {}: {:?}", input.task_id, input.config_name, agent.parse_error);
        assert_eq!(kinds, vec![AgentCallKind::First], "{}: no retry needed", input.task_id);
        assert!(!agent.comments.is_empty(), "{}: the fixture task is found by its title", input.task_id);
        assert!(agent.comments[0].comment_id.starts_with(&format!("{}_{}_", input.task_id, input.config_name)));
        let answer = harness_judge_answer("judge", &judge_user_message(&input, &agent), true);
        let judged = strict_judge_output(&answer, &agent, &input);
        assert!(!judged.fallback_used(), "{}: {answer}", input.task_id);
        assert_eq!(judged.agent_classifications.len(), agent.comments.len());
        assert_eq!(judged.human_comment_statuses.len(), input.human_comments.len());
        confirmed += judged.agent_classifications.iter().filter(|c| c.classification == "CONFIRMED").count();
    }
    assert!(confirmed > 0, "some sample findings are confirmed by word overlap");
}

#[test]
fn a_sloppy_agent_answers_markdown_until_the_harness_retries() {
    // pyledger-001's findings hold no brackets that would read as a JSON value in markdown.
    let input = sample_input("pyledger-001");
    let (agent, kinds) = run_scripted_agent("gpt-sloppy", &input);
    assert_eq!(kinds, vec![AgentCallKind::First, AgentCallKind::Retry]);
    assert!(agent.parse_success && !agent.comments.is_empty(), "{agent:?}");
    let first = harness_agent_answer("gpt-sloppy", None, &input.rendered_context);
    assert!(agent_output_from_answer(&input, &first).is_err(), "{first}");
}

async fn post_json(server: &ScriptedServer, path: &str, body: &Value) -> Value {
    let request = reqwest::Client::new().post(format!("{}{path}", server.base_url())).json(body);
    let request = if path == "/messages" {
        request.header("x-api-key", KEY).header("anthropic-version", "2023-06-01")
    } else {
        request.bearer_auth(KEY)
    };
    let response = request.send().await.expect("request reaches the server");
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("JSON body")
}

/// The answer's text in whichever API's shape it came.
fn answer_text(path: &str, body: &Value) -> String {
    let text = match path {
        "/chat/completions" => &body["choices"][0]["message"]["content"],
        "/responses" => &body["output"][0]["content"][0]["text"],
        _ => &body["content"][0]["text"],
    };
    text.as_str().unwrap_or_else(|| panic!("no text in {body}")).to_string()
}

/// One request per API shape that carries `system` as the system prompt and `user` as the
/// user message, the way each client sends it (the harness's Anthropic client sends the judge's
/// system prompt as a cacheable block).
fn requests(model: &str, system: &str, user: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "/chat/completions",
            json!({"model": model, "temperature": 0, "messages": [
                {"role": "system", "content": system}, {"role": "user", "content": user}]}),
        ),
        ("/responses", json!({"model": model, "instructions": system, "input": user})),
        (
            "/responses",
            json!({"model": model, "input": [
                {"role": "developer", "content": system}, {"role": "user", "content": [{"type": "input_text", "text": user}]}]}),
        ),
        (
            "/messages",
            json!({"model": model, "max_tokens": 4000, "system": system, "messages": [{"role": "user", "content": user}]}),
        ),
        (
            "/messages",
            json!({"model": model, "max_tokens": 4000,
                   "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
                   "messages": [{"role": "user", "content": user}]}),
        ),
    ]
}

#[tokio::test]
async fn the_harness_agent_prompt_gets_the_json_array_over_every_api() {
    let server = ScriptedServer::start(ScriptedConfig::default()).await.expect("server starts");
    let input = sample_input("tinyq-001");
    let expected = harness_agent_answer("gpt-test", None, &input.rendered_context);
    assert!(agent_output_from_answer(&input, &expected).is_ok_and(|out| !out.comments.is_empty()), "{expected}");
    for (path, body) in requests("gpt-test", AGENT_SYSTEM_PROMPT, &input.rendered_context) {
        assert_eq!(answer_text(path, &post_json(&server, path, &body).await), expected, "{path} {body}");
    }
    assert!(server.requests().iter().all(|r| r.role == Some(Role::Agent)));
    // Another system prompt gets the markdown review.
    let other = requests("gpt-test", "You are a reviewer.", &input.rendered_context).remove(0);
    assert!(answer_text(other.0, &post_json(&server, other.0, &other.1).await).starts_with("# Review"));
}

#[tokio::test]
async fn the_harness_judge_prompt_gets_the_harness_schema_over_every_api() {
    let server = ScriptedServer::start(ScriptedConfig::default()).await.expect("server starts");
    let input = sample_input("pyledger-001");
    let (agent, _) = run_scripted_agent("gpt-test", &input);
    let message = judge_user_message(&input, &agent);
    let expected = harness_judge_answer("judge", &message, true);
    assert!(!strict_judge_output(&expected, &agent, &input).fallback_used(), "{expected}");
    for (path, body) in requests("judge", JUDGE_SYSTEM_PROMPT, &message) {
        assert_eq!(answer_text(path, &post_json(&server, path, &body).await), expected, "{path}");
    }
    assert!(server.requests().iter().all(|r| r.role == Some(Role::SwePrBenchJudge)));
}

#[tokio::test]
async fn a_malformed_harness_judge_answers_prose_once_per_judging() {
    let server = ScriptedServer::start(ScriptedConfig::default()).await.expect("server starts");
    let input = sample_input("pyledger-001");
    let (agent, _) = run_scripted_agent("gpt-test", &input);
    let message = judge_user_message(&input, &agent);
    let (path, body) = requests("judge-malformed", JUDGE_SYSTEM_PROMPT, &message).remove(0);
    assert_eq!(answer_text(path, &post_json(&server, path, &body).await), PROSE_ANSWER);
    let again = answer_text(path, &post_json(&server, path, &body).await);
    assert!(!strict_judge_output(&again, &agent, &input).fallback_used(), "{again}");
    let (path, body) = requests("judge-broken", JUDGE_SYSTEM_PROMPT, &message).remove(0);
    for _ in 0..2 {
        assert_eq!(answer_text(path, &post_json(&server, path, &body).await), PROSE_ANSWER);
    }
}
