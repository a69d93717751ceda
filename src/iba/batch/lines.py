"""One model call as a Batch API request line, and a Batch API output line back as a Completion.

The request body is what `openai:` models send (llm.openai_compat.chat_request), with JSON replies
asked for as response_format json_schema (the Batch API's provider, OpenAI, takes it). Its
custom_id is a hash of the model and the body, so the same call in a later run finds its answer,
and two identical calls share one request. `call_params` reads a body back into the ModelRequest
Backend.send takes, which is how an offline answerer sees exactly what a provider would.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from iba.llm.base import Completion, ModelRequest, ToolSpec
from iba.llm.openai_compat import chat_request, parse_chat_completion
from iba.llm.toolcalls import openai_messages
from iba.types import Strict, stable_hash

URL = "/v1/chat/completions"
# a provider answers a request for NAME from a dated snapshot of it: NAME-2024-07-18, NAME-20240718
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def served_name(model_id: str) -> str:
    """The model name a provider is sent: `openai:NAME` -> NAME; other model strings as they are
    (an offline answerer reads its own --model)."""
    prefix, _, rest = model_id.partition(":")
    return rest if prefix == "openai" and rest else model_id


def same_model(asked: str | None, answered: str | None) -> bool:
    """Whether a result answered by `answered` (its body's model) answers a request for `asked`:
    the same name, or a dated snapshot of it; a result that names no model is taken at its word."""
    if not answered or not asked or answered == asked:
        return True
    return _SNAPSHOT.sub("", answered) == asked
RESPONSE_FORMAT_NAME = "reply"


class RequestLine(Strict):
    """A line of a Batch API input file."""

    custom_id: str
    method: str = "POST"
    url: str = URL
    body: dict[str, Any]


class ResultResponse(BaseModel):
    # providers add fields to these lines over time; what iba reads is checked, the rest ignored
    model_config = ConfigDict(extra="ignore")

    status_code: int
    request_id: str | None = None
    body: Any = None


class ResultLine(BaseModel):
    """A line of a Batch API output (or error) file: a response, or an error, for one custom_id."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    custom_id: str
    response: ResultResponse | None = None
    error: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.response is not None and self.response.status_code == 200

    @property
    def answered_by(self) -> str | None:
        """The model the answer names (its body's `model`), None where it names none."""
        body = self.response.body if self.ok and self.response is not None else None
        model = body.get("model") if isinstance(body, dict) else None
        return model if isinstance(model, str) and model else None

    def problem(self) -> str:
        """Why this line is not an answer (for messages and errored records)."""
        if self.error:
            return f"{self.error.get('code') or 'error'}: {self.error.get('message') or self.error}"
        if self.response is None:
            return "no response and no error"
        body = self.response.body
        detail = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
        return f"HTTP {self.response.status_code}" + (f": {detail}" if detail else "")


def request_line(model_id: str, served_name: str, request: ModelRequest) -> RequestLine:
    """The request line of one call of model `model_id`, sent to a provider as `served_name`."""
    body = chat_request(served_name, request)
    body["messages"] = openai_messages(request.messages)
    if request.json_schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": RESPONSE_FORMAT_NAME, "schema": request.json_schema, "strict": False}}
    return RequestLine(custom_id="iba-" + stable_hash([model_id, body], 40), body=body)


def call_params(body: dict[str, Any]) -> ModelRequest:
    """The request that produces `body` (the inverse of request_line)."""
    fmt = body.get("response_format") or {}
    schema = fmt.get("json_schema", {}).get("schema") if fmt.get("type") == "json_schema" else fmt.get("schema")
    tools = [ToolSpec(name=t["function"]["name"], description=t["function"].get("description", ""),
                      parameters=t["function"].get("parameters") or {}) for t in body.get("tools") or []]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = choice.get("function", {}).get("name")
    return ModelRequest(messages=body["messages"], max_tokens=body.get("max_tokens", 512),
                        temperature=body.get("temperature", 0.0), seed=body.get("seed"), json_schema=schema,
                        tools=tools or None, tool_choice=choice, stop=body.get("stop"))


def completion_body(comp: Completion, model: str) -> dict[str, Any]:
    """A Chat Completions response body holding `comp` (what an offline answerer writes)."""
    message: dict[str, Any] = {"role": "assistant", "content": comp.text}
    if comp.tool_calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                                 for c in comp.tool_calls]
    return {
        "id": "chatcmpl-iba", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": comp.finish_reason or "stop"}],
        "usage": {"prompt_tokens": comp.prompt_tokens, "completion_tokens": comp.completion_tokens,
                  "total_tokens": comp.prompt_tokens + comp.completion_tokens,
                  "prompt_tokens_details": {"cached_tokens": comp.reused_prompt_tokens}},
    }


def result_completion(line: ResultLine, tools: list[ToolSpec] | None, max_tokens: int, model_id: str) -> Completion:
    """The Completion of an answered line, parsed as a server's reply would be (tool calls in
    text included); ValueError when the body is not a chat completion or was cut short."""
    from openai.types.chat import ChatCompletion

    try:
        resp = ChatCompletion.model_validate(line.response.body if line.response else None)
        comp = parse_chat_completion(resp, tools, max_tokens, model_id)
        return comp.model_copy(update={"answered_by": line.answered_by})
    except Exception as e:  # noqa: BLE001 - pydantic's, or the parser's bad response / truncation
        raise ValueError(f"result for {line.custom_id} is not a usable chat completion: {str(e).splitlines()[0]}") from None
