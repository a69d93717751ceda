"""Our Backend interface over an inspect_ai Model: agents and judges call inspect's model.

Messages map one to one (system, user, assistant with tool calls, tool results); tools become
ToolInfo; tool_choice "required" is inspect's "any". A JSON schema is asked for by json_mode:
- schema: inspect's response_schema ($refs inlined: inspect's JSONSchema has no $defs); a provider
  that refuses it gets the schema in the prompt instead, from then on for that model, as
  iba.llm.openai_compat does (a provider answering 5xx is retried by inspect first: see --max-retries);
- json_object: response_format {"type": "json_object", "schema": ...} in the request body, which
  llama.cpp servers (llama-cpp-python's included) enforce with a grammar;
- prompt: the schema in the prompt only.
Callers validate the reply either way. A failed call is an LLMError (the runner's errored).
"""

from __future__ import annotations

import logging
from typing import Any

from iba.llm.base import Backend, Completion, LLMError, ModelRequest, ToolCall
from iba.llm.openai_compat import schema_note
from iba.llm.toolcalls import parse_arguments

log = logging.getLogger(__name__)

_PROMPT_JSON: set[str] = set()  # models that refused response_schema once: schema in the prompt from then on
JSON_MODES = ("schema", "json_object", "prompt")


def inline_refs(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """`schema` with every local "$ref" replaced by its definition (pydantic's "$defs")."""
    if isinstance(schema, dict):
        defs = {**(defs or {}), **schema.get("$defs", {})}
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return inline_refs(defs[ref.split("/")[-1]], defs)
        return {k: inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [inline_refs(v, defs) for v in schema]
    return schema


class InspectBackend(Backend):
    def __init__(self, model: Any, *, json_mode: str = "schema", context_window: int = 8192) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode={json_mode!r}: allowed {', '.join(JSON_MODES)}")
        self.model = model
        self.model_id = f"inspect:{model}"
        self.context_window = context_window
        self.json_mode = json_mode

    def _messages(self, messages: list[dict[str, Any]]) -> list[Any]:
        from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageTool, ChatMessageUser
        from inspect_ai.tool import ToolCall as InspectToolCall

        out: list[Any] = []
        for m in messages:
            role, content = m.get("role"), m.get("content") or ""
            if role == "system":
                out.append(ChatMessageSystem(content=content))
            elif role == "user":
                out.append(ChatMessageUser(content=content))
            elif role == "assistant":
                calls = [InspectToolCall(id=c.get("id", f"call_{i}"), function=c["function"]["name"],
                                         arguments=parse_arguments(c["function"].get("arguments")))
                         for i, c in enumerate(m.get("tool_calls") or [])]
                out.append(ChatMessageAssistant(content=content, tool_calls=calls or None))
            elif role == "tool":
                out.append(ChatMessageTool(content=content, tool_call_id=m.get("tool_call_id"), function=m.get("name")))
            else:
                raise ValueError(f"message role {role!r} has no inspect equivalent")
        return out

    async def send(self, request: ModelRequest) -> Completion:
        from inspect_ai.model import GenerateConfig, ResponseSchema
        from inspect_ai.tool import ToolFunction, ToolInfo, ToolParams
        from inspect_ai.util import JSONSchema

        request = request.offered()
        tools, tool_choice, json_schema = request.tools, request.tool_choice, request.json_schema
        config: dict[str, Any] = {"max_tokens": request.max_tokens, "temperature": request.temperature,
                                  "seed": request.seed, "stop_seqs": request.stop or None}
        msgs = list(request.messages)
        schema_mode = json_schema is not None and self.json_mode == "schema" and str(self.model) not in _PROMPT_JSON
        if json_schema is not None and self.json_mode == "json_object":
            config["extra_body"] = {"response_format": {"type": "json_object", "schema": inline_refs(json_schema)}}
        elif json_schema is not None and not schema_mode:
            msgs = msgs[:-1] + [dict(msgs[-1], content=(msgs[-1].get("content") or "") + "\n\n" + schema_note(json_schema))]
        infos = [ToolInfo(name=t.name, description=t.description or t.name,
                          parameters=ToolParams.model_validate(inline_refs(t.parameters) or {}))
                 for t in tools or []]
        choice: Any = None
        if tools:
            choice = {"auto": "auto", "required": "any", None: None}.get(tool_choice, None)
            if tool_choice not in ("auto", "required", None):
                choice = ToolFunction(name=tool_choice)

        async def generate(cfg: dict[str, Any], chat: list[dict[str, Any]]) -> Any:
            return await self.model.generate(self._messages(chat), tools=infos, tool_choice=choice,
                                             config=GenerateConfig(**cfg))

        try:
            if schema_mode:
                schema = JSONSchema.model_validate(inline_refs(json_schema))
                try:
                    out = await generate(config | {"response_schema": ResponseSchema(name="reply", json_schema=schema,
                                                                                      strict=False)}, msgs)
                except Exception as e:  # noqa: BLE001 - the provider refused structured output: say it in the prompt
                    log.warning("%s: response_schema refused (%s); the schema goes into the prompt from now on",
                                self.model_id, type(e).__name__)
                    _PROMPT_JSON.add(str(self.model))
                    last = dict(msgs[-1], content=(msgs[-1].get("content") or "") + "\n\n" + schema_note(json_schema))
                    out = await generate(config, msgs[:-1] + [last])
            else:
                out = await generate(config, msgs)
        except LLMError:
            raise
        except Exception as e:  # noqa: BLE001 - inspect's own retries are spent: an infrastructure fault
            raise LLMError(f"{self.model_id}: {type(e).__name__}: {str(e)[:300]}") from None
        return self._completion(out)

    def _completion(self, out: Any) -> Completion:
        if getattr(out, "error", None):
            raise LLMError(f"{self.model_id}: {out.error}")
        message = out.choices[0].message if out.choices else None
        calls = [ToolCall(id=c.id, name=c.function, arguments=dict(c.arguments or {}))
                 for c in (getattr(message, "tool_calls", None) or [])]
        usage = out.usage
        stop = out.stop_reason
        return Completion(
            text=out.completion or "", tool_calls=calls,
            prompt_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            reused_prompt_tokens=int(getattr(usage, "input_tokens_cache_read", 0) or 0),
            model=self.model_id,
            finish_reason="tool_calls" if calls else ("length" if stop == "max_tokens" else stop),
        )
