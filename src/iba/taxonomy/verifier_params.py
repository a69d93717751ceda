"""The verifier ids a taxonomy value may name, and the parameters each takes."""

from __future__ import annotations

# The deterministic checks of iba.eval.verifiers: id -> {parameter: type}. All parameters are required.
VERIFIER_PARAMS: dict[str, dict[str, type]] = {
    "word_count_range": {"min": int, "max": int},
    "word_count_max": {"max": int},
    "word_count_min": {"min": int},
    "numbered_list": {},
    "unnumbered_bullets": {},
    "no_bullets": {},
    "item_count": {"n": int},  # exactly n list items
    "first_person": {},
    "third_person": {},
    "has_code_block": {},
    "no_code_block": {},
    "has_table": {},
    "no_table": {},
    "has_headings": {},
    "no_headings": {},
    "contains_any": {"terms": list},
    "contains_none": {"terms": list},
    "has_citations": {},
}
VERIFIER_IDS: tuple[str, ...] = tuple(VERIFIER_PARAMS)
