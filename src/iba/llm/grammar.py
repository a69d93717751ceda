"""llama.cpp grammars from JSON schemas, with the string rule JSON itself requires."""

from __future__ import annotations

import json
import re
from typing import Any

# llama-cpp-python's converter (0.3.x) writes `char ::= [^"\\] | ...`, which lets the model put a raw
# newline or other control character inside a string: invalid JSON that the grammar itself allowed.
# llama.cpp's own converter excludes them, as JSON does (RFC 8259, section 7).
_LOOSE_CHAR = 'char ::= [^"\\\\] |'
_JSON_CHAR = 'char ::= [^"\\\\\\x7F\\x00-\\x1F] |'


def schema_gbnf(schema: dict[str, Any]) -> str:
    """The GBNF text of `schema` (root rule `root`), whose strings exclude control characters."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf  # lazy: heavy import

    gbnf = json_schema_to_gbnf(json.dumps(schema))
    return re.sub(r"^" + re.escape(_LOOSE_CHAR), lambda _m: _JSON_CHAR, gbnf, flags=re.M)
