"""JSON replies validated against a pydantic model, with one corrective retry.

The backend is asked for schema-constrained JSON (a grammar on llama.cpp, response_format on HTTP);
we still parse and validate, because providers only do their best. A bad reply is retried once
(by default) with the error quoted back to the model; after that StructuredOutputError carries the
last text and every Completion, so callers can record the item as unscored and still count tokens.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from iba.llm.base import Backend, Completion, LLMError
from iba.llm.jsontext import extract_json_object

M = TypeVar("M", bound=BaseModel)


class Reply(BaseModel):
    # the base of bounded reply models: unknown keys are ignored when validating (models add
    # "passage": n and the like), but the schema sent for constrained decoding forbids them, and
    # every string and list has a bound: a grammar then cannot ramble, and a max_tokens computed
    # from those bounds never cuts a reply short
    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})


class StructuredOutputError(LLMError):
    """The model's reply never validated. `.raw` is the last reply, `.completions` all of them."""

    def __init__(self, message: str, *, raw: str, completions: list[Completion]) -> None:
        super().__init__(message)
        self.raw = raw
        self.completions = completions


def describe_errors(e: ValidationError) -> str:
    """A validation error's problems in one line: `loc: msg; ...` ((root) for the object itself)."""
    return "; ".join(f"{'.'.join(map(str, err['loc'])) or '(root)'}: {err['msg']}" for err in e.errors())


def parse_reply(text: str, schema: type[M]) -> M:
    """Validate a reply (tolerating fences and leading prose); raises ValueError with the reason."""
    obj = extract_json_object(text)
    try:
        return schema.model_validate(obj)
    except ValidationError as e:
        raise ValueError(f"the JSON does not match the schema: {describe_errors(e)}") from None


async def complete_json(
    backend: Backend,
    messages: list[dict[str, Any]],
    schema: type[M],
    *,
    max_tokens: int = 512,
    temperature: float = 0.0,
    seed: int | None = None,
    retries: int = 1,
) -> tuple[M, list[Completion]]:
    """Ask for JSON matching `schema`; returns (validated object, completions used)."""
    json_schema = schema.model_json_schema()
    convo = list(messages)
    completions: list[Completion] = []
    for attempt in range(retries + 1):
        comp = await backend.complete(
            convo, max_tokens=max_tokens, temperature=temperature, seed=seed, json_schema=json_schema
        )
        completions.append(comp)
        try:
            return parse_reply(comp.text, schema), completions
        except ValueError as e:
            error = str(e)
            if comp.finish_reason == "length":
                error += f" (the reply was cut off at max_tokens={max_tokens})"
        if attempt < retries:
            convo = convo + [
                {"role": "assistant", "content": comp.text},
                {
                    "role": "user",
                    "content": f"That reply was not valid: {error}. Answer again with only a JSON object "
                    f"that matches the schema:\n{_compact(json_schema)}",
                },
            ]
    raise StructuredOutputError(
        f"{backend.model_id}: no valid {schema.__name__} JSON after {retries + 1} attempt(s): {error}",
        raw=completions[-1].text,
        completions=completions,
    )


def _compact(schema: dict[str, Any]) -> str:
    import json

    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
