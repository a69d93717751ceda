"""Name -> implementation, with lazy imports.

Each kind maps names to "module:attribute" strings; nothing is imported until it is used, so a
heavy optional dependency costs nothing unless its component is chosen. Third parties add their
own with `register(kind, name, "pkg.module:Class")` or through the entry-point group
`iba.<kind>` (e.g. `iba.agents`).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

_REGISTRY: dict[str, dict[str, str]] = {
    "agents": {
        "direct": "iba.agents.direct:DirectAgent",
        "rag": "iba.agents.rag:RagAgent",
        "iba": "iba.agents.iba_agent:IBAAgent",
        "iba-fc": "iba.agents.iba_fc:IBAFunctionCallingAgent",
        "external": "iba.agents.external:ExternalAgent",
        "memory": "iba.agents.memory:MemoryAgent",
        # reference rows (agents/references.py): the direct prompt with no history / the gold turns only
        "null": "iba.agents.references:NullAgent",
        "oracle": "iba.agents.references:OracleAgent",
    },
    # model-string prefix -> backend factory taking (rest_of_string, **options)
    "backends": {
        "local": "iba.llm.llama_cpp:LlamaCppBackend.from_spec",
        "openai": "iba.llm.openai_compat:OpenAICompatBackend.from_spec",
    },
    "embedders": {
        "minilm": "iba.retrieval.minilm:MiniLMEmbedder",
        "all-minilm-l6-v2": "iba.retrieval.minilm:MiniLMEmbedder",
        "all-mpnet-base-v2": "iba.retrieval.st_embedders:SentenceTransformerEmbedder.mpnet",
        "bge-m3": "iba.retrieval.st_embedders:SentenceTransformerEmbedder.bge_m3",
        # `openai:<model>`: any OpenAI-compatible /v1/embeddings server (the factory takes the model)
        "openai": "iba.retrieval.openai_embedder:OpenAIEmbedder",
    },
    # scorers of a stored record (eval/scoring.py): each an async (Scoring) -> None
    "scorers": {
        "qa": "iba.eval.scoring:qa_scorer",
        "slots": "iba.eval.scoring:slots_scorer",
        "verifiers": "iba.eval.scoring:verifiers_scorer",
        "judge": "iba.eval.scoring:judges_scorer",
    },
    "importers": {
        "prefeval": "iba.adapters.prefeval:import_prefeval",
    },
}


def register(kind: str, name: str, target: str) -> None:
    if ":" not in target:
        raise ValueError(f"target must be 'module:attribute', got {target!r}")
    _REGISTRY.setdefault(kind, {})[name] = target


def snapshot() -> dict[str, dict[str, str]]:
    """Every kind's name -> "module:attr" table, entry points included: what a worker process or a
    Ray actor needs to resolve names registered in the driver (by a script or a test) the same way."""
    for kind in list(_REGISTRY):
        _load_entry_points(kind)
    return {kind: dict(table) for kind, table in _REGISTRY.items()}


def restore(table: dict[str, dict[str, str]]) -> None:
    """Register every entry of a `snapshot()` (in another process)."""
    for kind, entries in table.items():
        for name, target in entries.items():
            register(kind, name, target)


def names(kind: str) -> list[str]:
    _load_entry_points(kind)
    return sorted(_REGISTRY.get(kind, {}))


def resolve(kind: str, name: str) -> Any:
    _load_entry_points(kind)
    table = _REGISTRY.get(kind, {})
    if name not in table:
        raise KeyError(f"unknown {kind[:-1] if kind.endswith('s') else kind} {name!r}; choose from: {', '.join(sorted(table))}")
    module_name, _, attr = table[name].partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


_loaded: set[str] = set()


def _load_entry_points(kind: str) -> None:
    if kind in _loaded:
        return
    _loaded.add(kind)
    for ep in entry_points(group=f"iba.{kind}"):
        _REGISTRY.setdefault(kind, {}).setdefault(ep.name, ep.value)
