use serde_json::{json, Value};

use super::*;

fn exchange(seq: u64, api: ApiKind, status: u16, request: Value, response: ExchangeBody) -> Exchange {
    let stream = matches!(response, ExchangeBody::Sse(_));
    Exchange {
        seq,
        api,
        path: "/v1/test".to_string(),
        model: Some("m".to_string()),
        started_at: chrono::DateTime::from_timestamp(1_700_000_000 + seq as i64, 0).unwrap(),
        first_byte_ms: Some(10),
        duration_ms: 100,
        status,
        stream,
        request,
        response,
        usage: Usage { input_tokens: 10, output_tokens: 5, ..Usage::default() },
        cost_usd: Some(0.001),
        refused: None,
    }
}

/// An event stream from `(event name, payload)` pairs.
fn sse(events: &[(Option<&str>, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| match name {
            Some(name) => format!("event: {name}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        })
        .collect()
}

fn answer(exchange: &Exchange) -> Answer {
    let (answer, warnings) = reassemble(exchange);
    assert!(warnings.is_empty(), "{warnings:?}");
    answer
}

fn call(id: Option<&str>, name: &str, arguments: &str) -> AnswerToolCall {
    AnswerToolCall { id: id.map(str::to_string), name: name.to_string(), arguments: arguments.to_string() }
}

fn tool_calls(trajectory: &Trajectory) -> Vec<(u64, u32, String, Option<String>, Action)> {
    trajectory
        .events
        .iter()
        .filter_map(|event| match event {
            TrajectoryEvent::ToolCall { seq, turn, name, command, action, .. } => {
                Some((*seq, *turn, name.clone(), command.clone(), *action))
            }
            _ => None,
        })
        .collect()
}

fn model_call_turns(trajectory: &Trajectory) -> Vec<(u64, u32)> {
    trajectory
        .events
        .iter()
        .filter_map(|event| match event {
            TrajectoryEvent::ModelCall { seq, turn, .. } => Some((*seq, *turn)),
            _ => None,
        })
        .collect()
}

fn tools_request() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "review"}], "tools": [{"type": "function"}]})
}

#[test]
fn openai_chat_json() {
    let body = json!({"choices": [{"index": 0, "message": {
        "role": "assistant",
        "content": "Looking at the diff.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"git diff HEAD~1\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.py\"}"}}
        ]
    }}]});
    let e = exchange(1, ApiKind::OpenAiChat, 200, tools_request(), ExchangeBody::Json(body));
    let a = answer(&e);
    assert_eq!(a.text, "Looking at the diff.");
    assert_eq!(
        a.tool_calls,
        vec![
            call(Some("call_1"), "bash", "{\"command\":\"git diff HEAD~1\"}"),
            call(Some("call_2"), "read_file", "{\"path\":\"a.py\"}"),
        ]
    );
    let t = build(&[e]);
    assert_eq!(
        tool_calls(&t),
        vec![
            (1, 1, "bash".into(), Some("git diff HEAD~1".into()), Action::Git),
            (1, 1, "read_file".into(), None, Action::Read),
        ]
    );
    assert_eq!(t.action_mix, BTreeMap::from([(Action::Read, 1), (Action::Git, 1)]));
}

#[test]
fn openai_chat_stream_fragments_concatenate_by_index() {
    let chunk = |delta: Value| json!({"choices": [{"index": 0, "delta": delta}]});
    let text = sse(&[
        (None, chunk(json!({"role": "assistant", "content": ""}))),
        (None, chunk(json!({"content": "Let me "}))),
        (None, chunk(json!({"content": "look."}))),
        (
            None,
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "c0", "type": "function", "function": {"name": "shell", "arguments": ""}}]}),
            ),
        ),
        (None, chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\": [\"bash\", \"-"}}]}))),
        (
            None,
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "c1", "function": {"name": "Grep", "arguments": "{\"pattern\""}}]}),
            ),
        ),
        (
            None,
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "lc\", \"cd repo && pytest -q\"]}"}}]})),
        ),
        (None, chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": ": \"TODO\"}"}}]}))),
        (None, json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})),
        (None, json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})),
    ]) + "data: [DONE]\n\n";
    let e = exchange(1, ApiKind::OpenAiChat, 200, tools_request(), ExchangeBody::Sse(text));
    let a = answer(&e);
    assert_eq!(a.text, "Let me look.");
    assert_eq!(
        a.tool_calls,
        vec![
            call(Some("c0"), "shell", "{\"command\": [\"bash\", \"-lc\", \"cd repo && pytest -q\"]}"),
            call(Some("c1"), "Grep", "{\"pattern\": \"TODO\"}"),
        ]
    );
    let t = build(&[e]);
    assert_eq!(
        tool_calls(&t),
        vec![
            (1, 1, "shell".into(), Some("cd repo && pytest -q".into()), Action::Execute),
            (1, 1, "Grep".into(), None, Action::Probe),
        ]
    );
    assert!(matches!(&t.events[1], TrajectoryEvent::AssistantText { text, .. } if text == "Let me look."));
}

#[test]
fn openai_responses_json() {
    let body = json!({"output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
        {"type": "function_call", "call_id": "call_a", "name": "shell", "arguments": "{\"command\":[\"bash\",\"-lc\",\"rg -n TODO\"]}"},
        {"type": "local_shell_call", "call_id": "call_b", "action": {"type": "exec", "command": ["cat", "src/a.py"]}},
        {"type": "custom_tool_call", "call_id": "call_c", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}
    ]});
    let e = exchange(1, ApiKind::OpenAiResponses, 200, json!({"input": []}), ExchangeBody::Json(body));
    let a = answer(&e);
    assert_eq!(a.text, "Checking.");
    assert_eq!((a.tool_calls[1].id.as_deref(), a.tool_calls[1].name.as_str()), (Some("call_b"), "local_shell"));
    let action: Value = serde_json::from_str(&a.tool_calls[1].arguments).unwrap();
    assert_eq!(action, json!({"type": "exec", "command": ["cat", "src/a.py"]}));
    assert_eq!(a.tool_calls[2], call(Some("call_c"), "apply_patch", "*** Begin Patch\n*** End Patch"));
    assert_eq!(
        tool_calls(&build(&[e])),
        vec![
            (1, 1, "shell".into(), Some("rg -n TODO".into()), Action::Probe),
            (1, 1, "local_shell".into(), Some("cat src/a.py".into()), Action::Read),
            (1, 1, "apply_patch".into(), None, Action::Write),
        ]
    );
}

fn responses_events(with_done: bool, with_completed: bool) -> String {
    let message = json!({"type": "message", "id": "msg_1", "role": "assistant",
        "content": [{"type": "output_text", "text": "Found it."}]});
    let function = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell",
        "arguments": "{\"command\":[\"bash\",\"-lc\",\"ls -la\"]}"});
    let mut events = vec![
        (Some("response.created"), json!({"type": "response.created", "response": {"output": []}})),
        (
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": "msg_1", "role": "assistant", "content": []}}),
        ),
        (
            Some("response.output_text.delta"),
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "Found "}),
        ),
        (
            Some("response.output_text.delta"),
            json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": "it."}),
        ),
        (
            Some("response.output_item.added"),
            json!({"type": "response.output_item.added", "output_index": 1,
                "item": {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "shell", "arguments": ""}}),
        ),
        (
            Some("response.function_call_arguments.delta"),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "{\"command\":[\"bash\","}),
        ),
        (
            Some("response.function_call_arguments.delta"),
            json!({"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "\"-lc\",\"ls -la\"]}"}),
        ),
    ];
    if with_done {
        events.push((
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "output_index": 0, "item": message}),
        ));
        events.push((
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "output_index": 1, "item": function}),
        ));
    }
    let output = if with_completed { json!([message, function]) } else { json!([]) };
    events.push((
        Some("response.completed"),
        json!({"type": "response.completed", "response": {"status": "completed", "output": output}}),
    ));
    sse(&events)
}

#[test]
fn openai_responses_stream_prefers_completed_then_done_items_then_deltas() {
    let expected = Answer {
        text: "Found it.".to_string(),
        tool_calls: vec![call(Some("call_1"), "shell", "{\"command\":[\"bash\",\"-lc\",\"ls -la\"]}")],
    };
    for (with_done, with_completed) in [(true, true), (true, false), (false, false)] {
        let text = responses_events(with_done, with_completed);
        let e = exchange(1, ApiKind::OpenAiResponses, 200, json!({"input": []}), ExchangeBody::Sse(text));
        assert_eq!(answer(&e), expected, "done items: {with_done}, completed: {with_completed}");
    }
    // A completed output differing from the items wins.
    let text = sse(&[
        (None, json!({"type": "response.output_text.delta", "output_index": 0, "delta": "draft"})),
        (
            None,
            json!({"type": "response.completed", "response": {"output": [
                {"type": "message", "content": [{"type": "output_text", "text": "final"}]}
            ]}}),
        ),
    ]);
    let e = exchange(1, ApiKind::OpenAiResponses, 200, json!({}), ExchangeBody::Sse(text));
    assert_eq!(answer(&e).text, "final");
}

#[test]
fn anthropic_json() {
    let body = json!({"type": "message", "role": "assistant", "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "x"},
        {"type": "text", "text": "I'll read it."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/repo/a.py"}},
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "grep -rn foo src | wc -l"}}
    ]});
    let e = exchange(1, ApiKind::Anthropic, 200, tools_request(), ExchangeBody::Json(body));
    let a = answer(&e);
    assert_eq!(a.text, "I'll read it.");
    assert_eq!(a.tool_calls[0], call(Some("toolu_1"), "Read", "{\"file_path\":\"/repo/a.py\"}"));
    assert_eq!(
        tool_calls(&build(&[e])),
        vec![
            (1, 1, "Read".into(), None, Action::Read),
            (1, 1, "Bash".into(), Some("grep -rn foo src | wc -l".into()), Action::Probe),
        ]
    );
}

fn anthropic_stream() -> String {
    let delta = |index: u64, delta: Value| {
        (Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": delta}))
    };
    sse(&[
        (
            Some("message_start"),
            json!({"type": "message_start", "message": {"id": "msg_1", "content": [], "usage": {"input_tokens": 10}}}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (Some("ping"), json!({"type": "ping"})),
        delta(0, json!({"type": "text_delta", "text": "Running "})),
        delta(0, json!({"type": "text_delta", "text": "the tests."})),
        (Some("content_block_stop"), json!({"type": "content_block_stop", "index": 0})),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}}),
        ),
        delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(1, json!({"type": "input_json_delta", "partial_json": "{\"comm"})),
        delta(1, json!({"type": "input_json_delta", "partial_json": "and\": \"FOO=1 timeout 60 "})),
        delta(1, json!({"type": "input_json_delta", "partial_json": "npm test\"}"})),
        (Some("content_block_stop"), json!({"type": "content_block_stop", "index": 1})),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 2,
                "content_block": {"type": "tool_use", "id": "toolu_10", "name": "TodoWrite", "input": {}}}),
        ),
        (Some("content_block_stop"), json!({"type": "content_block_stop", "index": 2})),
        (
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])
}

#[test]
fn anthropic_stream_fragments_concatenate_per_block() {
    let e = exchange(3, ApiKind::Anthropic, 200, tools_request(), ExchangeBody::Sse(anthropic_stream()));
    let a = answer(&e);
    assert_eq!(a.text, "Running the tests.");
    assert_eq!(
        a.tool_calls,
        vec![
            call(Some("toolu_9"), "Bash", "{\"command\": \"FOO=1 timeout 60 npm test\"}"),
            call(Some("toolu_10"), "TodoWrite", "{}"),
        ]
    );
    let t = build(&[e]);
    assert_eq!(
        tool_calls(&t),
        vec![
            (3, 1, "Bash".into(), Some("FOO=1 timeout 60 npm test".into()), Action::Execute),
            (3, 1, "TodoWrite".into(), None, Action::Other),
        ]
    );
}

#[test]
fn malformed_sse_is_tolerated_with_warnings() {
    // Junk lines, non-JSON data, a truncated final event and CRLF line ends.
    let stream = anthropic_stream().replace('\n', "\r\n");
    let stream = format!("garbage\r\ndata: {{not json\r\n\r\n{stream}data: {{\"type\": \"content_block_delta\", \"ind");
    let e = exchange(1, ApiKind::Anthropic, 200, tools_request(), ExchangeBody::Sse(stream));
    let t = build(&[e]);
    assert_eq!(t.tool_calls, 2);
    assert_eq!(t.warnings.len(), 3, "{:?}", t.warnings);
    assert!(t.warnings.iter().all(|w| w.starts_with("seq 1: ")));

    // Nothing readable at all: no panic, no calls.
    for (api, body) in [
        (
            ApiKind::OpenAiChat,
            ExchangeBody::Sse("data: {\"choices\": [{\"delta\": {\"tool_calls\": 5}}]}\n\n\u{0}\u{1}".into()),
        ),
        (ApiKind::OpenAiResponses, ExchangeBody::Sse("event: response.completed\ndata: {\"response\": 3}\n\n".into())),
        (ApiKind::Anthropic, ExchangeBody::Json(json!({"content": "not blocks"}))),
        (ApiKind::OpenAiChat, ExchangeBody::Json(json!([1, 2]))),
        (ApiKind::OpenAiChat, ExchangeBody::Text("<html>oops</html>".into())),
    ] {
        let t = build(&[exchange(1, api, 200, json!({}), body)]);
        assert_eq!(t.tool_calls, 0);
        assert_eq!(t.turns, 1);
    }

    // A chat stream whose arguments never closed: the call is kept, its arguments flagged.
    let text = sse(&[(
        None,
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "bash", "arguments": "{\"command\": \"ls"}}]}}]}),
    )]);
    let t = build(&[exchange(1, ApiKind::OpenAiChat, 200, tools_request(), ExchangeBody::Sse(text))]);
    assert_eq!(tool_calls(&t), vec![(1, 1, "bash".into(), None, Action::Other)]);
    assert_eq!(t.warnings.len(), 1, "{:?}", t.warnings);
}

#[test]
fn error_answers_have_no_text_or_calls() {
    let error = json!({"error": {"message": "rate limited", "type": "rate_limit_error"}});
    let mut refused = exchange(2, ApiKind::OpenAiChat, 200, json!({"messages": [1]}), ExchangeBody::Json(json!({})));
    refused.refused = Some("budget exceeded".to_string());
    let t =
        build(&[exchange(1, ApiKind::Anthropic, 429, json!({"messages": [1]}), ExchangeBody::Json(error)), refused]);
    assert_eq!(t.events.len(), 2);
    assert!(t.events.iter().all(|e| matches!(e, TrajectoryEvent::ModelCall { .. })));
    assert_eq!((t.turns, t.model_calls, t.tool_calls), (0, 2, 0));
    assert!(t.warnings.is_empty());
}

/// A mini-swe-agent request: the conversation so far, no tools.
fn mini_request(turn: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant..."})];
    for i in 0..turn {
        messages.push(json!({"role": "user", "content": format!("observation {i}")}));
    }
    json!({"model": "gpt-4.1", "messages": messages})
}

fn mini_answer(content: &str) -> ExchangeBody {
    ExchangeBody::Json(json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}))
}

#[test]
fn mini_swe_agent_text_protocol() {
    let review = "THOUGHT: I have enough to write the review.\n\n```bash\ncat <<'EOF' > review.md\n# Review\n\n- `parse()` drops the last line when input has no trailing newline && callers rely on it.\n- See ```python``` example; x > y | z\nEOF\n```";
    let exchanges = vec![
        exchange(
            1,
            ApiKind::OpenAiChat,
            200,
            mini_request(0),
            mini_answer("THOUGHT: Explore first.\n\n```bash\nls -la\n```"),
        ),
        exchange(
            2,
            ApiKind::OpenAiChat,
            200,
            mini_request(1),
            mini_answer("THOUGHT: Read the changed file.\n\n```bash\nnl -ba src/app.py | sed -n '1,120p'\n```"),
        ),
        exchange(
            3,
            ApiKind::OpenAiChat,
            429,
            mini_request(2),
            ExchangeBody::Json(json!({"error": {"message": "Rate limit reached"}})),
        ),
        exchange(4, ApiKind::OpenAiChat, 200, mini_request(2), mini_answer(review)),
        exchange(
            5,
            ApiKind::OpenAiChat,
            200,
            mini_request(3),
            mini_answer("THOUGHT: Done.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"),
        ),
    ];
    let t = build(&exchanges);
    assert_eq!((t.turns, t.model_calls, t.tool_calls), (4, 5, 4));
    assert_eq!(model_call_turns(&t), vec![(1, 1), (2, 2), (3, 3), (4, 3), (5, 4)]);
    let calls = tool_calls(&t);
    assert_eq!(
        calls.iter().map(|(seq, turn, name, _, action)| (*seq, *turn, name.as_str(), *action)).collect::<Vec<_>>(),
        vec![
            (1, 1, "bash", Action::Probe),
            (2, 2, "bash", Action::Read),
            (4, 3, "bash", Action::Write),
            (5, 4, "bash", Action::Other),
        ]
    );
    assert!(calls[2].3.as_deref().unwrap().starts_with("cat <<'EOF' > review.md\n# Review"));
    assert_eq!(calls[3].3.as_deref(), Some("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"));
    assert_eq!(
        t.action_mix,
        BTreeMap::from([(Action::Read, 1), (Action::Probe, 1), (Action::Write, 1), (Action::Other, 1)])
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let texts = t.events.iter().filter(|e| matches!(e, TrajectoryEvent::AssistantText { .. })).count();
    assert_eq!(texts, 4);
}

#[test]
fn shell_blocks_in_text_are_not_calls_when_tools_were_offered() {
    let e = exchange(
        1,
        ApiKind::OpenAiChat,
        200,
        tools_request(),
        mini_answer("Review done. To reproduce:\n```bash\npytest -q\n```"),
    );
    let t = build(&[e]);
    assert_eq!(t.tool_calls, 0);
    assert_eq!(t.turns, 1);

    let two = mini_answer("```bash\nls\n```\nand\n```bash\ncat a\n```");
    let t = build(&[exchange(1, ApiKind::OpenAiChat, 200, mini_request(0), two)]);
    assert_eq!(t.tool_calls, 2);
    assert_eq!(t.warnings.len(), 1);
}

#[test]
fn turns_rule() {
    let ok = || mini_answer("ok");
    let fail = || ExchangeBody::Json(json!({"error": {"message": "overloaded"}}));
    let side = json!({"model": "small", "messages": [{"role": "user", "content": "title?"}]});
    let mut refused = exchange(8, ApiKind::OpenAiChat, 429, mini_request(3), fail());
    refused.refused = Some("budget".to_string());
    let exchanges = vec![
        exchange(1, ApiKind::OpenAiChat, 200, mini_request(0), ok()),
        // Failed twice, a side call in between, then retried successfully.
        exchange(2, ApiKind::OpenAiChat, 529, mini_request(1), fail()),
        exchange(3, ApiKind::OpenAiChat, 200, side, ok()),
        exchange(4, ApiKind::OpenAiChat, 500, mini_request(1), fail()),
        exchange(5, ApiKind::OpenAiChat, 200, mini_request(1), ok()),
        // Failed and never retried with the same messages (the harness changed them).
        exchange(6, ApiKind::OpenAiChat, 400, mini_request(2), fail()),
        exchange(7, ApiKind::OpenAiChat, 200, mini_request(3), ok()),
        // Refused by the proxy at the end: a turn attempted, never made.
        refused,
    ];
    // Out of order on input: taken in seq order.
    let mut shuffled = exchanges.clone();
    shuffled.reverse();
    let t = build(&shuffled);
    assert_eq!((t.turns, t.model_calls), (4, 8));
    assert_eq!(model_call_turns(&t), vec![(1, 1), (2, 3), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4), (8, 5)]);
}

#[test]
fn jsonl_one_tagged_event_a_line() {
    let e = exchange(1, ApiKind::Anthropic, 200, tools_request(), ExchangeBody::Sse(anthropic_stream()));
    let t = build(&[e]);
    let jsonl = to_jsonl(&t);
    let lines: Vec<Value> = jsonl.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["model_call", "assistant_text", "tool_call", "tool_call"]);
    assert_eq!(lines[2]["action"], "execute");
    assert_eq!(lines[2]["command"], "FOO=1 timeout 60 npm test");
    assert_eq!(lines[0]["usage"]["input_tokens"], 10);
    let back: Vec<TrajectoryEvent> = jsonl.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(back, t.events);
    let summary = serde_json::to_value(&t).unwrap();
    assert_eq!(summary["action_mix"], json!({"execute": 1, "other": 1}));
}

#[test]
fn truncated_streams_and_commands_never_panic() {
    let chat = sse(&[(
        None,
        json!({"choices": [{"index": 0, "delta": {"content": "é ```bash\nls\n```", "tool_calls": [{"index": 0, "id": "a", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}]}}]}),
    )]);
    let streams = [
        (ApiKind::Anthropic, anthropic_stream()),
        (ApiKind::OpenAiResponses, responses_events(true, true)),
        (ApiKind::OpenAiChat, chat),
    ];
    for (api, text) in streams {
        for (cut, _) in text.char_indices() {
            for request in [json!({}), tools_request()] {
                let e = exchange(1, api, 200, request, ExchangeBody::Sse(text[..cut].to_string()));
                let t = build(&[e]);
                assert_eq!(t.turns, 1);
            }
        }
    }
    let command = "FOO='a b' sudo -u x timeout 5 bash -lc \"cat <<'EOF' > r.md\n$(git log) `x` <(y)\nEOF\n\" | tee -a f && find . -exec rm {} \\; || python3 -c 'open(\"f\", \"w\")' ; for f in *; do x; done";
    for (cut, _) in command.char_indices() {
        classify_command(&command[..cut]);
        classify_tool("shell", &json!({"command": ["bash", "-lc", &command[..cut]]}));
    }
    for text in ["```", "```bash", "```bash\n", "```bash\n```", "x```bash\n\n```"] {
        let t = build(&[exchange(1, ApiKind::OpenAiChat, 200, json!({}), mini_answer(text))]);
        assert_eq!(t.tool_calls, 0, "{text:?}");
    }
}
