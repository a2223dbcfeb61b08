//! Tool-call parsing as Qwen writes calls, whole and token by token.

use super::*;

/// Stream `pieces`; (text, calls, events).
fn parse(pieces: &[&str]) -> (String, Vec<ToolCall>, Vec<ToolEvent>) {
    let mut p = ToolCallParser::new(true, 7);
    let mut events = vec![];
    for piece in pieces {
        events.extend(p.push(piece));
    }
    events.extend(p.finish());
    let text = events
        .iter()
        .filter_map(|e| match e {
            ToolEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    (text, p.calls().to_vec(), events)
}

/// Split `s` into pieces of `n` characters (a stand-in for tokens).
fn chars(s: &str, n: usize) -> Vec<String> {
    let c: Vec<char> = s.chars().collect();
    c.chunks(n).map(|w| w.iter().collect()).collect()
}

const CALL: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"北京\", \"unit\": {\"c\": 1}}}\n</tool_call>";

#[test]
fn a_qwen_tool_call_parses_to_name_and_arguments_text() {
    let (text, calls, events) = parse(&[CALL]);
    assert_eq!(text, "");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].function.name, "get_weather");
    assert_eq!(
        calls[0].function.arguments,
        "{\"city\": \"北京\", \"unit\": {\"c\": 1}}"
    );
    assert!(calls[0].id.starts_with("call_") && calls[0].id.len() == 29);
    assert!(matches!(&events[0], ToolEvent::Start { index: 0, name, .. } if name == "get_weather"));
}

#[test]
fn streamed_token_by_token_the_name_comes_first_then_argument_fragments() {
    for n in [1, 2, 3, 5] {
        let pieces = chars(CALL, n);
        let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let (text, calls, events) = parse(&refs);
        assert_eq!(text, "", "pieces of {n}");
        assert!(
            matches!(&events[0], ToolEvent::Start { .. }),
            "pieces of {n}"
        );
        let args: String = events[1..]
            .iter()
            .map(|e| match e {
                ToolEvent::Args { index: 0, text } => text.as_str(),
                other => panic!("pieces of {n}: {other:?}"),
            })
            .collect();
        assert_eq!(args, "{\"city\": \"北京\", \"unit\": {\"c\": 1}}");
        assert_eq!(calls[0].function.arguments, args);
        // The arguments arrive in several fragments, not all at the end.
        assert!(events.len() > 3, "pieces of {n}: {events:?}");
    }
}

#[test]
fn two_calls_with_text_before_them_get_their_own_index_and_id() {
    let add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 2, \"b\": 3}}\n</tool_call>";
    let reply = format!("Let me check.\n\n{CALL}\n{add}\n");
    let (text, calls, _) = parse(
        &chars(&reply, 4)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(text, "Let me check.");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].function.name, "add");
    assert_eq!(calls[1].function.arguments, "{\"a\": 2, \"b\": 3}");
    assert_ne!(calls[0].id, calls[1].id);
}

#[test]
fn arguments_before_the_name_are_parsed_when_the_block_ends() {
    let (_, calls, events) = parse(&[
        "<tool_call>{\"arguments\": {\"x\": [1, 2]}, ",
        "\"name\": \"f\"}</tool_call>",
    ]);
    assert_eq!(calls[0].function.name, "f");
    assert_eq!(calls[0].function.arguments, "{\"x\":[1,2]}");
    assert_eq!(events.len(), 2);
}

#[test]
fn a_block_that_is_not_a_call_and_text_without_tools_stay_text() {
    let (text, calls, _) = parse(&["<tool_call>not json</tool_call> ok"]);
    assert!(calls.is_empty());
    assert_eq!(text, "<tool_call>not json</tool_call> ok");
    let mut off = ToolCallParser::new(false, 0);
    assert_eq!(off.push(CALL), vec![ToolEvent::Text(CALL.into())]);
    let (text, _, _) = parse(&["Plain answer.\n"]);
    assert_eq!(text, "Plain answer.\n");
}

#[test]
fn a_call_cut_off_by_the_token_limit_keeps_what_was_written() {
    let (_, calls, _) = parse(&["<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"ab"]);
    assert_eq!(calls[0].function.name, "f");
    assert_eq!(calls[0].function.arguments, "{\"q\": \"ab");
    let (text, calls, _) = parse(&["<tool_call>\n{\"na"]);
    assert!(calls.is_empty());
    assert_eq!(text, "<tool_call>\n{\"na");
}

#[test]
fn a_whole_call_without_its_closing_tag_is_complete() {
    let (_, calls, _) = parse(&["<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"]);
    assert_eq!(calls[0].function.arguments, "{\"a\": 1}");
}
