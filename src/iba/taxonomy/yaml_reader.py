"""Reading one taxonomy YAML file: safe loading that refuses duplicate keys, with errors as
`TaxonomyError`s that give the file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from iba.taxonomy.errors import TaxonomyError


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A safe loader that refuses duplicate mapping keys (PyYAML silently keeps the last one);
    on libyaml where PyYAML has it (~10x faster: every command that loads the taxonomy waits for it)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaxonomyError(f"{path}: cannot read: {e}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        context = getattr(e, "context", None)
        raise TaxonomyError(f"{path}: YAML syntax error at {where}{problem}" + (f" ({context})" if context else "")) from None
