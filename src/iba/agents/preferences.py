"""Extracted preferences resolved to one current value per aspect (the latest wins)."""

from __future__ import annotations

from typing import Any

from iba.agents.replies import Preference
from iba.types import Strict


class ResolvedPreferences(Strict):
    current: list[dict[str, Any]]  # Preference dumps, latest first, one per aspect
    superseded: list[dict[str, Any]]  # older values of an aspect that was updated later


def resolve_latest(prefs: list[Preference]) -> ResolvedPreferences:
    """One value per aspect: the one with the latest date wins (ties: the later-listed one)."""
    latest: dict[str, tuple[int, Preference]] = {}
    superseded: list[Preference] = []
    for i, p in enumerate(prefs):
        key = " ".join(p.aspect.lower().split())
        if key in latest and (latest[key][1].date, latest[key][0]) > (p.date, i):
            superseded.append(p)
            continue
        if key in latest:
            superseded.append(latest[key][1])
        latest[key] = (i, p)
    current = sorted((p for _, p in latest.values()), key=lambda p: p.date, reverse=True)
    return ResolvedPreferences(
        current=[p.model_dump() for p in current], superseded=[p.model_dump() for p in superseded]
    )


def preference_lines(resolved: ResolvedPreferences) -> list[str]:
    return [f"{p['aspect']}: {p['value']} ({p['kind']}, {p['date'] or 'undated'})" for p in resolved.current]
