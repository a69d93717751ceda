"""API parameters as a pydantic model built from the task's JSON schema.

`complete_json` constrains decoding with the model's schema and validates the reply, so enum
values, types and bounds are enforced the same way for every agent; `validate_params` checks params
that arrive another way (function-calling arguments, external agents).
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from iba.llm.structured import describe_errors

SMALL_RANGE = 100
_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


def params_model(api_schema: dict[str, Any], name: str = "ApiParams") -> type[BaseModel]:
    """A strict pydantic model accepting exactly the params `api_schema` allows (built once per
    schema: creating a pydantic model costs milliseconds, and every action of a scenario shares it)."""
    return _params_model(json.dumps(api_schema, sort_keys=True), name)


@functools.lru_cache(maxsize=256)
def _params_model(schema_json: str, name: str) -> type[BaseModel]:
    api_schema = json.loads(schema_json)
    if api_schema.get("type", "object") != "object":
        raise ValueError(f"an API schema must describe an object, got type {api_schema.get('type')!r}")
    required = set(api_schema.get("required") or [])
    fields: dict[str, Any] = {}
    for pname, prop in (api_schema.get("properties") or {}).items():
        ptype = prop.get("type", "string")
        if ptype not in _TYPES:
            raise ValueError(f"parameter {pname!r} has unsupported type {ptype!r}")
        annotation: Any = _TYPES[ptype]
        constraints: dict[str, Any] = {"description": prop.get("description") or None}
        lo, hi = prop.get("minimum"), prop.get("maximum")
        if prop.get("enum"):
            annotation = Literal[tuple(prop["enum"])]  # type: ignore[misc]
        elif ptype == "integer" and lo is not None and hi is not None and hi - lo <= SMALL_RANGE:
            # a small integer range becomes an enum: llama.cpp grammars enforce enums but not bounds
            annotation = Literal[tuple(range(math.ceil(lo), math.floor(hi) + 1))]  # type: ignore[misc]
        else:
            if lo is not None:
                constraints["ge"] = lo
            if hi is not None:
                constraints["le"] = hi
        if pname in required:
            fields[pname] = (annotation, Field(..., **constraints))
        else:
            fields[pname] = (annotation | None, Field(None, **constraints))
    # strict: "2" is not an integer and 1 is not True; a model must write the type the schema names
    return create_model(name, __config__=ConfigDict(extra="forbid", strict=True), **fields)


def decoding_schema(api_schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema to constrain decoding with: the API schema with small integer ranges as enums."""
    return params_model(api_schema).model_json_schema()


def validate_params(api_schema: dict[str, Any], params: Any) -> dict[str, Any]:
    """The params if they satisfy the schema (optional ones left unset are dropped); else ValueError."""
    if not isinstance(params, dict):
        raise ValueError(f"params must be a JSON object, got {type(params).__name__}")
    try:
        obj = params_model(api_schema).model_validate(params)
    except ValidationError as e:
        raise ValueError(describe_errors(e)) from None
    return obj.model_dump(exclude_none=True)
