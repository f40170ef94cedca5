//! End-to-end tests: a started server driven over HTTP with reqwest.

use serde_json::{json, Value};

use super::fixtures;
use super::judge::tests::{fixture_pair, honest_judge, judge_prompt};
use super::sse::MALFORMED_FRAME;
use super::*;
use lightsout_model::event_stream::{self, SseEvent};

const KEY: &str = "sk-scripted-test";
const REVIEWER_SYSTEM: &str = "You are a meticulous code reviewer.";
const JUDGE_SYSTEM: &str = "You are a code review judge. Decide whether the finding matches the ground truth.";

async fn start(config: ScriptedConfig) -> ScriptedServer {
    ScriptedServer::start(config).await.expect("server starts")
}

fn agent_prompt() -> String {
    let task = &fixtures::get().scripted[0];
    format!("Title: {}\n\nReview this pull request and list the defects.", task.title)
}

enum Auth<'a> {
    Bearer(&'a str),
    XApiKey(&'a str),
    None,
}

async fn post(server: &ScriptedServer, path: &str, auth: Auth<'_>, body: &Value) -> reqwest::Response {
    let request = reqwest::Client::new().post(format!("{}{path}", server.base_url())).json(body);
    let request = match auth {
        Auth::Bearer(key) => request.bearer_auth(key),
        Auth::XApiKey(key) => request.header("x-api-key", key).header("anthropic-version", "2023-06-01"),
        Auth::None => request,
    };
    request.send().await.expect("request reaches the server")
}

async fn post_json(server: &ScriptedServer, path: &str, body: &Value) -> Value {
    let auth = if path == "/messages" { Auth::XApiKey(KEY) } else { Auth::Bearer(KEY) };
    let response = post(server, path, auth, body).await;
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.expect("JSON body")
}

async fn post_sse(server: &ScriptedServer, path: &str, body: &Value) -> Vec<SseEvent> {
    let auth = if path == "/messages" { Auth::XApiKey(KEY) } else { Auth::Bearer(KEY) };
    let response = post(server, path, auth, body).await;
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    event_stream::events(&response.text().await.expect("stream body"))
}

fn json_of(frame: &SseEvent) -> Value {
    serde_json::from_str(&frame.data).unwrap_or_else(|e| panic!("frame {:?} is not JSON: {e}", frame.data))
}

fn chat_body(system: &str, user: &str) -> Value {
    json!({"model": "gpt-test", "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]})
}

fn chat_text(body: &Value) -> String {
    body["choices"][0]["message"]["content"].as_str().expect("content").to_string()
}

#[tokio::test]
async fn chat_completions_non_streaming_with_usage_and_cache() {
    let server = start(ScriptedConfig::default()).await;
    let body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
    let first = post_json(&server, "/chat/completions", &body).await;
    let text = chat_text(&first);
    assert_eq!(text, agent_answer("gpt-test", None, &agent_prompt()));
    assert!(text.starts_with("# Review\n\n1. **[P"), "{text}");
    let prompt_tokens = estimate_tokens(&format!("{REVIEWER_SYSTEM}\n{}", agent_prompt()));
    let usage = &first["usage"];
    assert_eq!(usage["prompt_tokens"], prompt_tokens);
    assert_eq!(usage["completion_tokens"], estimate_tokens(&text));
    assert_eq!(usage["total_tokens"], prompt_tokens + estimate_tokens(&text));
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 0);
    assert_eq!(first["choices"][0]["finish_reason"], "stop");

    // Same prompt again: same answer, and now a cache hit.
    let second = post_json(&server, "/chat/completions", &body).await;
    assert_eq!(chat_text(&second), text);
    assert_eq!(second["usage"]["prompt_tokens_details"]["cached_tokens"], prompt_tokens.min(256));

    let log = server.requests();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].path, "/v1/chat/completions");
    assert_eq!((log[0].model.as_deref(), log[0].api_key.as_deref()), (Some("gpt-test"), Some(KEY)));
    assert_eq!((log[0].role, log[0].status, log[0].stream), (Some(Role::Agent), 200, false));
    server.shutdown().await;
}

#[tokio::test]
async fn chat_completions_streaming_reassembles_and_reports_usage() {
    let server = start(ScriptedConfig::default()).await;
    let mut body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
    body["reasoning_effort"] = json!("high");
    let expected = chat_text(&post_json(&server, "/chat/completions", &body).await);
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let frames = post_sse(&server, "/chat/completions", &body).await;
    assert_eq!(frames.last().map(|f| f.data.as_str()), Some("[DONE]"));
    let chunks: Vec<Value> = frames[..frames.len() - 1].iter().map(json_of).collect();
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, expected);
    assert!(chunks.len() > 4, "the answer arrives in several deltas");
    let usage_chunk = chunks.last().expect("usage chunk");
    assert_eq!(usage_chunk["choices"], json!([]));
    let answer = estimate_tokens(&expected);
    assert_eq!(usage_chunk["usage"]["completion_tokens_details"]["reasoning_tokens"], answer * 4);
    assert_eq!(usage_chunk["usage"]["completion_tokens"], answer * 5);
    assert_eq!(chunks[chunks.len() - 2]["choices"][0]["finish_reason"], "stop");

    // Without include_usage there is no usage chunk.
    body["stream_options"] = json!({"include_usage": false});
    let frames = post_sse(&server, "/chat/completions", &body).await;
    assert!(frames.iter().all(|f| f.data == "[DONE]" || json_of(f).get("usage").is_none()));
    server.shutdown().await;
}

fn responses_body(stream: bool) -> Value {
    json!({
        "model": "gpt-test-mini",
        "instructions": REVIEWER_SYSTEM,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": agent_prompt()}]}],
        "reasoning": {"effort": "low"},
        "stream": stream,
    })
}

#[tokio::test]
async fn responses_non_streaming_and_streaming() {
    let server = start(ScriptedConfig::default()).await;
    let response = post_json(&server, "/responses", &responses_body(false)).await;
    assert_eq!(response["status"], "completed");
    let message = &response["output"][0];
    assert_eq!((&message["type"], &message["role"]), (&json!("message"), &json!("assistant")));
    assert_eq!(message["content"][0]["type"], "output_text");
    let text = message["content"][0]["text"].as_str().expect("text").to_string();
    assert_eq!(text, agent_answer("gpt-test-mini", Some(Effort::Low), &agent_prompt()));
    let answer = estimate_tokens(&text);
    let usage = &response["usage"];
    assert_eq!(usage["input_tokens"], estimate_tokens(&format!("{REVIEWER_SYSTEM}\n{}", agent_prompt())));
    assert_eq!(
        (&usage["output_tokens"], &usage["output_tokens_details"]["reasoning_tokens"]),
        (&json!(answer * 2), &json!(answer))
    );
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);

    let frames = post_sse(&server, "/responses", &responses_body(true)).await;
    let events: Vec<&str> = frames.iter().filter_map(|f| f.name.as_deref()).collect();
    assert_eq!(events.first(), Some(&"response.created"));
    assert_eq!(events.last(), Some(&"response.completed"));
    let streamed: String = frames
        .iter()
        .filter(|f| f.name.as_deref() == Some("response.output_text.delta"))
        .map(|f| json_of(f)["delta"].as_str().expect("delta").to_string())
        .collect();
    assert_eq!(streamed, text);
    let completed = json_of(frames.last().expect("completed"));
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(completed["response"]["output"][0]["content"][0]["text"], text.as_str());
    assert_eq!(completed["response"]["usage"]["output_tokens"], answer * 2);
    assert!(completed["response"]["usage"]["input_tokens_details"]["cached_tokens"].as_u64() > Some(0));
    server.shutdown().await;
}

/// A request as Codex sends it: its instructions as the first `developer` message, its shell
/// tool `exec_command`, and the conversation so far replayed in `input`, `steps` shell calls in.
fn codex_body(steps: u32) -> Value {
    let text = |text: &str| json!([{"type": "input_text", "text": text}]);
    let mut input = vec![
        json!({"type": "message", "role": "developer", "content": text("You are a coding agent in the Codex CLI.")}),
        json!({"type": "message", "role": "user", "content": text(&agent_prompt())}),
    ];
    for step in 0..steps {
        let id = format!("call_{step}");
        let arguments = json!({"cmd": "true"}).to_string();
        input.push(json!({"type": "function_call", "call_id": id, "name": "exec_command", "arguments": arguments}));
        input.push(json!({"type": "function_call_output", "call_id": id, "output": "Process exited with code 0"}));
    }
    let exec_command = json!({"type": "object", "properties": {"cmd": {"type": "string"}}});
    json!({
        "model": "gpt-test",
        "input": input,
        "tools": [
            {"type": "function", "name": "exec_command", "parameters": exec_command},
            {"type": "function", "name": "write_stdin", "parameters": {"type": "object"}},
        ],
        "tool_choice": "auto",
        "reasoning": {"effort": "high", "summary": "auto"},
        "store": false,
        "stream": true,
    })
}

/// The finished output items of a Responses stream, from its `response.output_item.done` events
/// (what Codex acts on), checked against the same items in `response.completed`.
fn finished_items(frames: &[SseEvent]) -> Vec<Value> {
    let payloads: Vec<Value> = frames.iter().map(json_of).collect();
    for (frame, payload) in frames.iter().zip(&payloads) {
        assert_eq!(frame.name.as_deref(), payload["type"].as_str());
    }
    let sequence: Vec<u64> = payloads.iter().map(|p| p["sequence_number"].as_u64().expect("sequence number")).collect();
    assert_eq!(sequence, (0..payloads.len() as u64).collect::<Vec<_>>());
    let items: Vec<Value> =
        payloads.iter().filter(|p| p["type"] == "response.output_item.done").map(|p| p["item"].clone()).collect();
    let completed = payloads.last().expect("completed");
    assert_eq!(completed["type"], "response.completed");
    assert_eq!(completed["response"]["output"], json!(items));
    items
}

#[tokio::test]
async fn codex_is_driven_through_exec_command_and_ends_with_an_answer() {
    let server = start(ScriptedConfig::default()).await;
    let mut commands = Vec::new();
    for step in 0..3 {
        let items = finished_items(&post_sse(&server, "/responses", &codex_body(step)).await);
        assert_eq!(items[0]["type"], "message", "step {step}");
        let calls: Vec<&Value> = items.iter().filter(|i| i["type"] == "function_call").collect();
        if step < 2 {
            assert_eq!(calls.len(), 1, "step {step}: {items:?}");
            assert_eq!(calls[0]["name"], "exec_command");
            assert!(calls[0]["call_id"].as_str().is_some_and(|id| !id.is_empty()));
            let arguments: Value = serde_json::from_str(calls[0]["arguments"].as_str().expect("arguments")).unwrap();
            commands.push(arguments["cmd"].as_str().expect("cmd").to_string());
        } else {
            assert!(calls.is_empty(), "the last step only answers, which ends `codex exec`: {items:?}");
        }
    }
    assert_eq!(commands[0], agentic_step("gpt-test", Some(Effort::High), "", 0).1);
    let review = agent_answer("gpt-test", Some(Effort::High), &agent_prompt());
    assert!(commands[1].starts_with("cat > review.md <<'LIGHTSOUT_REVIEW'\n"), "{}", commands[1]);
    assert!(commands[1].contains(&review), "{}", commands[1]);
    assert!(server.requests().iter().all(|r| r.role == Some(Role::Agent) && r.stream));

    // The same steps without streaming.
    let mut body = codex_body(1);
    body["stream"] = json!(false);
    let response = post_json(&server, "/responses", &body).await;
    assert_eq!(response["output"][1]["type"], "function_call");
    assert!(response["output"][1]["arguments"].as_str().is_some_and(|a| a.contains("review.md")));
    server.shutdown().await;
}

#[tokio::test]
async fn mini_swe_agent_is_driven_through_bash_and_submits() {
    let server = start(ScriptedConfig::default()).await;
    let mut body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
    body["tools"] = json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]);
    for step in 0..3 {
        let answer = post_json(&server, "/chat/completions", &body).await;
        let choice = &answer["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "bash");
        let arguments: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments")).unwrap();
        let command = arguments["command"].as_str().expect("command");
        if step == 2 {
            assert_eq!(command, SUBMIT_COMMAND, "mini-swe-agent still submits with its marker");
        }
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.push(choice["message"].clone());
        messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "ok"}));
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_scripted_agent_runs_its_commands_then_submits_and_others_are_unchanged() {
    let server = start(ScriptedConfig::default()).await;
    server.script_agent("hostile", vec!["id -u".into(), "cat /etc/passwd > review.md".into()]);
    let commands_of = |model: &'static str| {
        let server = &server;
        async move {
            let mut body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
            body["model"] = json!(model);
            body["tools"] =
                json!([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]);
            let mut commands = Vec::new();
            for _ in 0..3 {
                let answer = post_json(server, "/chat/completions", &body).await;
                let call = answer["choices"][0]["message"]["tool_calls"][0].clone();
                let arguments: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments")).unwrap();
                commands.push(arguments["command"].as_str().expect("command").to_string());
                let messages = body["messages"].as_array_mut().expect("messages");
                messages.push(answer["choices"][0]["message"].clone());
                messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "ok"}));
            }
            commands
        }
    };
    assert_eq!(commands_of("hostile").await, ["id -u", "cat /etc/passwd > review.md", SUBMIT_COMMAND]);
    let normal = commands_of("gpt-test").await;
    assert!(normal[1].starts_with("cat > review.md <<'LIGHTSOUT_REVIEW'"), "{normal:?}");
    assert_eq!(normal[2], SUBMIT_COMMAND);

    // A harness that ends on an answer gets no tool call once the script is done.
    server.script_agent("gpt-test", vec!["true".into()]);
    let items = finished_items(&post_sse(&server, "/responses", &codex_body(1)).await);
    assert!(items.iter().all(|i| i["type"] != "function_call"), "{items:?}");
    server.shutdown().await;
}

fn messages_body(system: &str, user: &str, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": system,
        "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "stream": stream,
    })
}

#[tokio::test]
async fn anthropic_messages_non_streaming_and_streaming() {
    let server = start(ScriptedConfig::default()).await;
    let message = post_json(&server, "/messages", &messages_body(REVIEWER_SYSTEM, &agent_prompt(), false)).await;
    assert_eq!(
        (&message["type"], &message["role"], &message["stop_reason"]),
        (&json!("message"), &json!("assistant"), &json!("end_turn"))
    );
    assert_eq!(message["content"][0]["type"], "text");
    let text = message["content"][0]["text"].as_str().expect("text").to_string();
    assert_eq!(text, agent_answer("claude-test", Some(Effort::High), &agent_prompt()));
    let input = estimate_tokens(&format!("{REVIEWER_SYSTEM}\n{}", agent_prompt()));
    let output = estimate_tokens(&text) * 5; // Thinking counts as high effort: 4× reasoning.
    let usage = &message["usage"];
    assert_eq!((&usage["input_tokens"], &usage["output_tokens"]), (&json!(input), &json!(output)));
    assert_eq!((&usage["cache_read_input_tokens"], &usage["cache_creation_input_tokens"]), (&json!(0), &json!(0)));

    let frames = post_sse(&server, "/messages", &messages_body(REVIEWER_SYSTEM, &agent_prompt(), true)).await;
    let events: Vec<&str> = frames.iter().map(|f| f.name.as_deref().expect("named events")).collect();
    assert_eq!(events[..2], ["message_start", "content_block_start"]);
    assert_eq!(events[events.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
    let payloads: Vec<Value> = frames.iter().map(json_of).collect();
    for (event, payload) in events.iter().zip(&payloads) {
        assert_eq!(payload["type"], *event);
    }
    let streamed: String = payloads
        .iter()
        .filter(|p| p["type"] == "content_block_delta")
        .map(|p| {
            assert_eq!(p["delta"]["type"], "text_delta");
            p["delta"]["text"].as_str().expect("text").to_string()
        })
        .collect();
    assert_eq!(streamed, text);
    // Second identical prompt: a cache read, excluded from input_tokens as upstream does.
    let start_usage = &payloads[0]["message"]["usage"];
    let cached = input.min(256);
    assert_eq!(
        (&start_usage["input_tokens"], &start_usage["cache_read_input_tokens"]),
        (&json!(input - cached), &json!(cached))
    );
    assert_eq!(payloads[payloads.len() - 2]["usage"]["output_tokens"], output);
    server.shutdown().await;
}

/// A request as Claude Code sends it: system blocks, its tools (`Bash` among them), extended
/// thinking, streaming.
fn claude_code_body() -> Value {
    let schema = |props: Value| json!({"type": "object", "properties": props});
    json!({
        "model": "claude-test",
        "max_tokens": 32000,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332;"},
            {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK."},
        ],
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nPrimary working directory: /repo\n</system-reminder>"},
            {"type": "text", "text": agent_prompt(), "cache_control": {"type": "ephemeral"}},
        ]}],
        "tools": [
            {"name": "Agent", "description": "Launch a subagent.", "input_schema": schema(json!({"prompt": {"type": "string"}}))},
            {"name": "Bash", "description": "Executes a bash command.", "input_schema": schema(json!({"command": {"type": "string"}}))},
            {"name": "Write", "description": "Writes a file.", "input_schema": schema(json!({"file_path": {"type": "string"}, "content": {"type": "string"}}))},
        ],
        "thinking": {"type": "enabled", "budget_tokens": 31999},
        "metadata": {"user_id": "{}"},
        "stream": true,
    })
}

/// The finished content blocks of a Messages stream, rebuilt from its deltas as a client does,
/// and its stop reason.
fn streamed_message(frames: &[SseEvent]) -> (Vec<Value>, String) {
    let payloads: Vec<Value> = frames.iter().map(json_of).collect();
    for (frame, payload) in frames.iter().zip(&payloads) {
        assert_eq!(frame.name.as_deref(), payload["type"].as_str());
    }
    assert_eq!(payloads[0]["type"], "message_start");
    assert_eq!(payloads.last().expect("frames")["type"], "message_stop");
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial_json: Vec<String> = Vec::new();
    let mut stop_reason = String::new();
    for payload in &payloads {
        let index = payload["index"].as_u64().unwrap_or(0) as usize;
        match payload["type"].as_str().expect("type") {
            "content_block_start" => {
                assert_eq!(index, blocks.len(), "blocks start in order");
                blocks.push(payload["content_block"].clone());
                partial_json.push(String::new());
            }
            "content_block_delta" => match payload["delta"]["type"].as_str().expect("delta type") {
                "text_delta" => {
                    let text = format!(
                        "{}{}",
                        blocks[index]["text"].as_str().unwrap(),
                        payload["delta"]["text"].as_str().unwrap()
                    );
                    blocks[index]["text"] = json!(text);
                }
                "input_json_delta" => partial_json[index].push_str(payload["delta"]["partial_json"].as_str().unwrap()),
                other => panic!("unexpected delta {other}"),
            },
            "content_block_stop" if blocks[index]["type"] == "tool_use" => {
                blocks[index]["input"] = serde_json::from_str(&partial_json[index]).expect("the input is JSON");
            }
            "message_delta" => stop_reason = payload["delta"]["stop_reason"].as_str().expect("stop reason").to_string(),
            _ => {}
        }
    }
    (blocks, stop_reason)
}

#[tokio::test]
async fn claude_code_is_driven_through_bash_and_ends_with_an_answer() {
    let server = start(ScriptedConfig::default()).await;
    let mut body = claude_code_body();
    let mut commands = Vec::new();
    for step in 0..3 {
        let (blocks, stop_reason) = streamed_message(&post_sse(&server, "/messages", &body).await);
        assert_eq!(blocks[0]["type"], "text", "step {step}");
        let calls: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "tool_use").collect();
        if step < 2 {
            assert_eq!(stop_reason, "tool_use", "step {step}");
            assert_eq!(calls.len(), 1, "step {step}: {blocks:?}");
            assert_eq!(calls[0]["name"], "Bash");
            assert!(calls[0]["id"].as_str().is_some_and(|id| id.starts_with("toolu_")), "{:?}", calls[0]);
            commands.push(calls[0]["input"]["command"].as_str().expect("command").to_string());
        } else {
            assert_eq!(stop_reason, "end_turn", "the last step only answers, which ends `claude -p`");
            assert!(calls.is_empty(), "{blocks:?}");
            assert_eq!(blocks[0]["text"], "The review is written.");
        }
        // Claude Code replays the answer and the tool's result with every request.
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.push(json!({"role": "assistant", "content": blocks}));
        if let Some(call) = calls.first() {
            let result = json!({"type": "tool_result", "tool_use_id": call["id"], "content": "ok", "is_error": false});
            messages.push(json!({"role": "user", "content": [result]}));
        }
    }
    assert_eq!(commands[0], agentic_step("claude-test", Some(Effort::High), "", 0).1);
    let review = agent_answer("claude-test", Some(Effort::High), &agent_prompt());
    assert!(commands[1].starts_with("cat > review.md <<'LIGHTSOUT_REVIEW'\n"), "{}", commands[1]);
    assert!(commands[1].contains(&review), "{}", commands[1]);
    assert!(server.requests().iter().all(|r| r.role == Some(Role::Agent) && r.stream && r.path == "/v1/messages"));

    // The same step without streaming.
    let mut body = claude_code_body();
    body["stream"] = json!(false);
    let message = post_json(&server, "/messages", &body).await;
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!((&message["content"][1]["type"], &message["content"][1]["name"]), (&json!("tool_use"), &json!("Bash")));
    assert_eq!(message["content"][1]["input"]["command"], commands[0]);

    // A side request without the tools (a title, a summary) gets a plain answer.
    body.as_object_mut().expect("object").remove("tools");
    let message = post_json(&server, "/messages", &body).await;
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["content"].as_array().map(Vec::len), Some(1));
    server.shutdown().await;
}

#[tokio::test]
async fn anthropic_effort_comes_from_output_config_else_thinking() {
    let server = start(ScriptedConfig::default()).await;
    let output_tokens = |message: &Value| message["usage"]["output_tokens"].as_u64().expect("output tokens");
    let mut body = messages_body(REVIEWER_SYSTEM, &agent_prompt(), false);
    let high = output_tokens(&post_json(&server, "/messages", &body).await);
    body["output_config"] = json!({"effort": "low"});
    let low = post_json(&server, "/messages", &body).await;
    assert_eq!(low["content"][0]["text"], agent_answer("claude-test", Some(Effort::Low), &agent_prompt()));
    body["output_config"] = json!({"effort": "max"});
    let max = post_json(&server, "/messages", &body).await;
    assert_eq!(max["content"][0]["text"], agent_answer("claude-test", Some(Effort::XHigh), &agent_prompt()));
    assert!(output_tokens(&low) < high && high < output_tokens(&max));
    body["output_config"] = json!({});
    body["thinking"] = json!({"type": "disabled"});
    let plain = post_json(&server, "/messages", &body).await;
    assert_eq!(plain["content"][0]["text"], agent_answer("claude-test", None, &agent_prompt()));
    body["thinking"] = json!({"type": "adaptive"});
    assert_eq!(output_tokens(&post_json(&server, "/messages", &body).await), high);
    body["output_config"] = json!({"effort": "extreme"});
    let response = post(&server, "/messages", Auth::XApiKey(KEY), &body).await;
    assert_eq!(response.status(), 400);
    server.shutdown().await;
}

#[tokio::test]
async fn answers_are_deterministic_across_instances() {
    let a = start(ScriptedConfig::default()).await;
    let b = start(ScriptedConfig::default()).await;
    let body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
    let text_a = chat_text(&post_json(&a, "/chat/completions", &body).await);
    let text_b = chat_text(&post_json(&b, "/chat/completions", &body).await);
    assert_eq!(text_a, text_b);
    let mut other = body.clone();
    other["model"] = json!("another-model-large");
    other["reasoning_effort"] = json!("xhigh");
    let _ = post_json(&a, "/chat/completions", &other).await; // Must not disturb later answers.
    assert_eq!(chat_text(&post_json(&a, "/chat/completions", &body).await), text_a);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn judge_uses_the_answer_key_and_falls_back_to_word_overlap() {
    let server = start(ScriptedConfig::default()).await;
    for want in [true, false] {
        let (finding, truth) = fixture_pair(want);
        let mut body = chat_body(JUDGE_SYSTEM, &judge_prompt(&finding, &truth));
        body["model"] = json!(honest_judge(&finding, &truth));
        let verdict: Value = serde_json::from_str(&chat_text(&post_json(&server, "/chat/completions", &body).await))
            .expect("judge answers JSON");
        assert_eq!(verdict["verdict"], if want { "yes" } else { "no" });
        assert!(verdict["reason"].as_str().is_some_and(|r| !r.is_empty()));
    }
    assert!(server.requests().iter().all(|r| r.role == Some(Role::Judge)));

    let unknown = judge_prompt(
        "The cache key ignores the tenant id, so tenants can read each other's cached entries.",
        "Cache key omits the tenant id; cached entries leak between tenants.",
    );
    let message = post_json(&server, "/messages", &messages_body(JUDGE_SYSTEM, &unknown, false)).await;
    let verdict: Value = serde_json::from_str(message["content"][0]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(verdict["verdict"], "yes");
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_judge_recovers_on_retry_and_broken_never_does() {
    let server = start(ScriptedConfig::default()).await;
    let (finding, truth) = fixture_pair(true);
    let mut body = chat_body(JUDGE_SYSTEM, &judge_prompt(&finding, &truth));
    body["model"] = json!("judge-malformed");
    assert_eq!(chat_text(&post_json(&server, "/chat/completions", &body).await), PROSE_ANSWER);
    // The client's retry appends a reminder after the blocks; it is still the same pair.
    body["messages"][1]["content"] =
        json!(format!("{}\n\nAnswer with the JSON object only.", judge_prompt(&finding, &truth)));
    let retry = chat_text(&post_json(&server, "/chat/completions", &body).await);
    assert!(serde_json::from_str::<Value>(&retry).is_ok_and(|v| v["verdict"].is_string()), "{retry}");
    body["model"] = json!("judge-broken");
    for _ in 0..2 {
        assert_eq!(chat_text(&post_json(&server, "/chat/completions", &body).await), PROSE_ANSWER);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn wrong_or_missing_keys_get_401_in_the_providers_shape() {
    let config = ScriptedConfig { expected_api_key: Some(KEY.to_string()), ..ScriptedConfig::default() };
    let server = start(config).await;
    let chat = chat_body(REVIEWER_SYSTEM, "hello");
    let wrong = post(&server, "/chat/completions", Auth::Bearer("sk-wrong"), &chat).await;
    assert_eq!(wrong.status(), 401);
    let error: Value = wrong.json().await.expect("JSON error");
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("incorrect API key")));
    assert_eq!(post(&server, "/chat/completions", Auth::None, &chat).await.status(), 401);

    // Anthropic wants `x-api-key`; a bearer token is not its credential.
    let messages = messages_body(REVIEWER_SYSTEM, "hello", false);
    let bearer = post(&server, "/messages", Auth::Bearer(KEY), &messages).await;
    assert_eq!(bearer.status(), 401);
    let error: Value = bearer.json().await.expect("JSON error");
    assert_eq!((&error["type"], &error["error"]["type"]), (&json!("error"), &json!("authentication_error")));
    assert_eq!(post(&server, "/messages", Auth::XApiKey(KEY), &messages).await.status(), 200);
    assert_eq!(post(&server, "/chat/completions", Auth::Bearer(KEY), &chat).await.status(), 200);

    let log = server.requests();
    let seen: Vec<(Option<&str>, u16)> = log.iter().map(|r| (r.api_key.as_deref(), r.status)).collect();
    assert_eq!(seen, vec![(Some("sk-wrong"), 401), (None, 401), (Some(KEY), 401), (Some(KEY), 200), (Some(KEY), 200)]);
    assert_eq!(log[0].model.as_deref(), Some("gpt-test"), "rejected requests are logged with their model");
    server.shutdown().await;
}

#[tokio::test]
async fn status_every_nth_is_counted_per_path() {
    let faults = Faults { status_every_nth: Some((429, 3)), ..Faults::default() };
    let server = start(ScriptedConfig { faults, ..ScriptedConfig::default() }).await;
    let chat = chat_body(REVIEWER_SYSTEM, "hello");
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let response = post(&server, "/chat/completions", Auth::Bearer(KEY), &chat).await;
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            assert_eq!(response.headers()["retry-after"], "0");
            let error: Value = response.json().await.expect("JSON error");
            assert_eq!(error["error"]["code"], "rate_limit_exceeded");
        }
    }
    assert_eq!(statuses, [200, 200, 429, 200, 200, 429]);
    // Another path has its own count.
    let response = post(&server, "/responses", Auth::Bearer(KEY), &responses_body(false)).await;
    assert_eq!(response.status(), 200);
    server.shutdown().await;

    let faults = Faults { status_every_nth: Some((529, 1)), ..Faults::default() };
    let server = start(ScriptedConfig { faults, ..ScriptedConfig::default() }).await;
    let response = post(&server, "/messages", Auth::XApiKey(KEY), &messages_body(REVIEWER_SYSTEM, "x", false)).await;
    assert_eq!(response.status(), 529);
    assert!(response.headers().get("retry-after").is_none());
    let error: Value = response.json().await.expect("JSON error");
    assert_eq!(error["error"]["type"], "overloaded_error");
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_stream_chunk_and_delay_faults() {
    let faults = Faults { malformed_stream_chunk: true, delay_ms: 50, ..Faults::default() };
    let server = start(ScriptedConfig { faults, ..ScriptedConfig::default() }).await;
    let started = std::time::Instant::now();
    let mut body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
    body["stream"] = json!(true);
    let frames = post_sse(&server, "/chat/completions", &body).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(50));
    assert_eq!(format!("data: {}\n\n", frames[0].data), MALFORMED_FRAME);
    assert!(serde_json::from_str::<Value>(&frames[0].data).is_err());
    assert!(serde_json::from_str::<Value>(&frames[1].data).is_ok());
    let frames = post_sse(&server, "/messages", &messages_body(REVIEWER_SYSTEM, "x", true)).await;
    assert_eq!((frames[0].name.as_deref(), frames[1].name.as_deref()), (None, Some("message_start")));
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_requests_get_400_naming_the_problem() {
    let server = start(ScriptedConfig::default()).await;
    let cases: [(&str, Value, &str); 5] = [
        ("/chat/completions", json!({"messages": [{"role": "user", "content": "x"}]}), "`model`"),
        ("/chat/completions", json!({"model": "m", "messages": []}), "`messages`"),
        (
            "/chat/completions",
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "reasoning_effort": "max"}),
            "reasoning_effort",
        ),
        ("/responses", json!({"model": "m"}), "`input`"),
        ("/messages", json!({"model": "m", "messages": [{"role": "user", "content": "x"}]}), "`max_tokens`"),
    ];
    for (path, body, needle) in cases {
        let auth = if path == "/messages" { Auth::XApiKey(KEY) } else { Auth::Bearer(KEY) };
        let response = post(&server, path, auth, &body).await;
        assert_eq!(response.status(), 400, "{path} {body}");
        let error: Value = response.json().await.expect("JSON error");
        let message = error["error"]["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains(needle), "{message:?} should name {needle}");
    }
    let raw = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .bearer_auth(KEY)
        .body("{not json")
        .send()
        .await
        .expect("sent");
    assert_eq!(raw.status(), 400);
    let error: Value = raw.json().await.expect("JSON error");
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("not valid JSON")));
    server.shutdown().await;
}

#[tokio::test]
async fn models_and_health() {
    let server = start(ScriptedConfig::default()).await;
    let client = reqwest::Client::new();
    let root = server.base_url().trim_end_matches("/v1").to_string();
    assert_eq!(client.get(format!("{root}/healthz")).send().await.expect("health").status(), 200);
    let list = |server: &ScriptedServer| client.get(format!("{}/models", server.base_url())).bearer_auth(KEY).send();
    let empty: Value = list(&server).await.expect("models").json().await.expect("JSON");
    assert_eq!(empty["data"], json!([]));
    post_json(&server, "/chat/completions", &chat_body(REVIEWER_SYSTEM, "hi")).await;
    post_json(&server, "/messages", &messages_body(REVIEWER_SYSTEM, "hi", false)).await;
    let listed: Value = list(&server).await.expect("models").json().await.expect("JSON");
    let ids: Vec<&str> = listed["data"].as_array().expect("data").iter().filter_map(|m| m["id"].as_str()).collect();
    assert_eq!(ids, ["gpt-test", "claude-test"]);
    assert_eq!(server.models(), ids);
    server.shutdown().await;
}

/// GitHub Copilot CLI offers `bash` beside `read_bash` (and many more tools); unlike
/// mini-swe-agent, whose tool is also `bash`, it ends its run when the model answers without a
/// tool call.
#[tokio::test]
async fn copilot_cli_is_driven_through_bash_and_ends_with_an_answer() {
    let server = start(ScriptedConfig::default()).await;
    let mut body = chat_body(REVIEWER_SYSTEM, &agent_prompt());
    let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}});
    body["tools"] = json!([tool("bash"), tool("read_bash"), tool("view"), tool("create")]);
    let mut commands = Vec::new();
    for step in 0..3 {
        let answer = post_json(&server, "/chat/completions", &body).await;
        let choice = &answer["choices"][0];
        if step == 2 {
            assert_eq!(choice["finish_reason"], "stop", "the last step only answers: {answer}");
            assert!(choice["message"].get("tool_calls").is_none(), "{answer}");
            break;
        }
        assert_eq!(choice["finish_reason"], "tool_calls", "step {step}");
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "bash");
        let arguments: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments")).unwrap();
        commands.push(arguments["command"].as_str().expect("command").to_string());
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.push(choice["message"].clone());
        messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "ok"}));
    }
    assert_eq!(commands[0], agentic_step("gpt-test", None, "", 0).1);
    assert!(commands[1].starts_with("cat > review.md <<'LIGHTSOUT_REVIEW'\n"), "{}", commands[1]);

    // Over the Responses API the same tools are recognised.
    let tools = json!([
        {"type": "function", "name": "bash", "parameters": {"type": "object"}},
        {"type": "function", "name": "read_bash", "parameters": {"type": "object"}},
    ]);
    let responses = json!({"model": "gpt-test", "input": agent_prompt(), "tools": tools});
    let response = post_json(&server, "/responses", &responses).await;
    assert_eq!(response["output"][1]["name"], "bash", "{response}");
    server.shutdown().await;
}

#[tokio::test]
async fn start_on_binds_the_given_address_and_reports_a_bind_error() {
    // A free port, released before the server binds it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let server = ScriptedServer::start_on(addr, ScriptedConfig::default()).await.expect("server starts");
    assert_eq!(server.addr(), addr);
    assert_eq!(server.base_url(), format!("http://127.0.0.1:{port}/v1"));
    let body = post_json(&server, "/chat/completions", &chat_body(REVIEWER_SYSTEM, &agent_prompt())).await;
    assert!(!chat_text(&body).is_empty());

    // The port is taken now: a second server on it fails to start.
    let error = ScriptedServer::start_on(addr, ScriptedConfig::default()).await.err().expect("port in use");
    assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
    server.shutdown().await;
}
