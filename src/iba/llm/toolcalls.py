"""Function-calling helpers shared by the backends: message shapes, parsing, forcing grammars.

Conversation messages use the OpenAI shapes everywhere in IBA:
  {"role": "assistant", "content": "", "tool_calls": [{"id", "type": "function",
                                                        "function": {"name", "arguments"}}]}
  {"role": "tool", "tool_call_id": "...", "content": "<result text>"}
Build them with `assistant_message(completion)` and `tool_result_message(call, content)`.

Models that were trained for tools (Qwen2.5) answer in the Hermes format:
  <tool_call>\n{"name": "...", "arguments": {...}}\n</tool_call>
We parse that from text (embedded model, or any server that returns it as plain content) and,
to force a call, constrain decoding to exactly that shape with the tool's argument schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

from iba.llm.base import Completion, ToolCall, ToolSpec
from iba.llm.grammar import schema_gbnf
from iba.llm.jsontext import extract_json_object

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)

# The Qwen2.5 chat template's tool preamble, used for models whose template has no tool support.
_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tools}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": <args-json-object>}}\n'
    "</tool_call>"
)


def openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


def check_tool_choice(tools: list[ToolSpec] | None, tool_choice: str | None) -> None:
    if tool_choice in (None, "auto", "none", "required"):
        return
    names = [t.name for t in tools or []]
    if tool_choice not in names:
        raise ValueError(f"tool_choice {tool_choice!r} is not one of the tools {names} (or 'auto'/'required'/'none')")


def offered_tools(tools: list[ToolSpec] | None, tool_choice: str | None) -> tuple[list[ToolSpec] | None, str | None]:
    """The tools a request offers, checked: none at all when tool_choice is "none" or there are none
    (backends that build their own request; an OpenAI server is told "none" instead)."""
    check_tool_choice(tools, tool_choice)
    if tool_choice == "none" or not tools:
        return None, None
    return tools, tool_choice


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments as a dict; accepts a dict or its JSON text (OpenAI sends text)."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    value = json.loads(raw, strict=False) if isinstance(raw, str) else raw
    if isinstance(value, str):  # some servers double-encode
        value = json.loads(value, strict=False)
    if not isinstance(value, dict):
        raise ValueError(f"tool arguments must be a JSON object, got {type(value).__name__}")
    return value


def parse_text_tool_calls(text: str, tool_names: list[str]) -> tuple[str, list[ToolCall]]:
    """Split Hermes-format tool calls out of `text`: (remaining text, calls).

    A block that is not valid JSON or names an unknown tool is left in the text, so the caller
    sees what the model wrote instead of a silently dropped call.
    """
    calls: list[ToolCall] = []
    kept: list[str] = []
    pos = 0
    for m in _BLOCK.finditer(text):
        kept.append(text[pos : m.start()])
        pos = m.end()
        call = _call_from_json(m.group(1), tool_names, len(calls))
        if call is None:
            kept.append(m.group(0))
        else:
            calls.append(call)
    kept.append(text[pos:])
    rest = "".join(kept).strip()
    if not calls and "{" in rest:
        # Small models often drop the tags and answer with the bare {"name", "arguments"} object,
        # sometimes in ```json fences. Only an object naming one of the tools counts as a call.
        try:
            obj = extract_json_object(rest)
        except ValueError:
            return rest, calls
        call = _call_from_json(json.dumps(obj), tool_names, 0)
        if call is not None:
            return "", [call]
    return rest, calls


def _call_from_json(blob: str, tool_names: list[str], index: int) -> ToolCall | None:
    try:
        obj = json.loads(blob, strict=False)
        if not isinstance(obj, dict) or obj.get("name") not in tool_names:
            return None
        args = parse_arguments(obj.get("arguments", obj.get("parameters", {})))
    except (ValueError, RecursionError):  # deep nesting raises RecursionError: not a call either
        return None
    return ToolCall(id=f"call_{index}", name=obj["name"], arguments=args)


def forced_call_schema(tools: list[ToolSpec], tool_choice: str) -> dict[str, Any]:
    """JSON schema of one {"name", "arguments"} object: the named tool, or any tool ("required")."""
    chosen = [t for t in tools if tool_choice == "required" or t.name == tool_choice]

    def one(t: ToolSpec) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"name": {"const": t.name}, "arguments": t.parameters or {"type": "object"}},
            "required": ["name", "arguments"],
        }

    return one(chosen[0]) if len(chosen) == 1 else {"anyOf": [one(t) for t in chosen]}


def forced_call_gbnf(tools: list[ToolSpec], tool_choice: str) -> str:
    """A llama.cpp grammar for `<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`."""
    body = schema_gbnf(forced_call_schema(tools, tool_choice))
    body = re.sub(r"^root ::=", "iba-call ::=", body, count=1, flags=re.M)
    return f'root ::= "<tool_call>\\n" iba-call "\\n</tool_call>"\n{body}'


def tools_system_text(tools: list[ToolSpec]) -> str:
    listing = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in openai_tools(tools))
    return _TOOLS_PREAMBLE.format(tools=listing)


def messages_for_template(
    messages: list[dict[str, Any]], tools: list[ToolSpec] | None, template_has_tools: bool
) -> list[dict[str, Any]]:
    """Adapt OpenAI-shaped messages to a GGUF chat template.

    A tool-aware template (Qwen2.5) gets arguments as dicts (it applies `tojson` itself). Other
    templates (SmolLM2) only know role + content, so tool calls become Hermes text, tool results
    become user turns in <tool_response> tags, and the tool list goes into the system message.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        m = dict(m)
        if m.get("content") is None:
            m["content"] = ""
        calls = m.get("tool_calls")
        if template_has_tools:
            if calls:
                m["tool_calls"] = [_call_dict(c) for c in calls]
            out.append(m)
            continue
        if m["role"] == "assistant" and calls:
            text = "\n".join(
                f"{OPEN}\n{json.dumps({'name': c['name'], 'arguments': c['arguments']}, ensure_ascii=False)}\n{CLOSE}"
                for c in (_call_dict(c) for c in calls)
            )
            out.append({"role": "assistant", "content": (m["content"] + "\n" + text).strip()})
        elif m["role"] == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    if tools and not template_has_tools:
        preamble = tools_system_text(tools)
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": out[0]["content"] + "\n\n" + preamble}
        else:
            out.insert(0, {"role": "system", "content": preamble})
    return out


def _call_dict(call: Any) -> dict[str, Any]:
    """{"name", "arguments" (dict)} from an OpenAI tool_call dict, a ToolCall, or a flat dict."""
    if isinstance(call, ToolCall):
        return {"name": call.name, "arguments": call.arguments}
    fn = call.get("function", call)
    return {"name": fn["name"], "arguments": parse_arguments(fn.get("arguments"))}


def openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the OpenAI API wants them: tool-call arguments as JSON text."""
    out = []
    for m in messages:
        calls = m.get("tool_calls")
        if calls:
            m = dict(m)
            m["tool_calls"] = [
                {
                    "id": c.id if isinstance(c, ToolCall) else c.get("id", f"call_{i}"),
                    "type": "function",
                    "function": {
                        "name": (d := _call_dict(c))["name"],
                        "arguments": json.dumps(d["arguments"], ensure_ascii=False),
                    },
                }
                for i, c in enumerate(calls)
            ]
        out.append(m)
    return out


def assistant_message(completion: Completion) -> dict[str, Any]:
    """The assistant turn to append to the conversation after `completion`."""
    msg: dict[str, Any] = {"role": "assistant", "content": completion.text or ""}
    if completion.tool_calls:
        msg["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in completion.tool_calls
        ]
    return msg


def tool_result_message(call: ToolCall, content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}
