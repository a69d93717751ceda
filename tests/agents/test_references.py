"""The reference agents' options and names (their histories: tests/run/test_oracle.py)."""

from __future__ import annotations

import pytest

from iba.agents.references import NullAgent, OracleAgent, reference_of, row_order
from tests.agents.helpers import env
from tests.fakes import ScriptedBackend


def test_reference_names_and_report_order():
    assert [reference_of(s) for s in ("null", "direct?max_tokens=9", "oracle?superseded=true", "rag", "iba")] == [
        "null", "direct", "oracle", None, None]
    assert sorted(["oracle", "rag", "direct", "null", "iba"], key=row_order) == ["null", "rag", "iba", "direct", "oracle"]


def test_options_that_would_change_nothing_are_refused(tmp_path):
    e = env(ScriptedBackend([]), tmp_path)
    with pytest.raises(ValueError, match="agent null: unknown option 'max_history_tokens'"):
        NullAgent(e, max_history_tokens="100")  # null shows no history to cap
    assert OracleAgent(e, superseded="true", max_tokens="32").opts.superseded is True
    with pytest.raises(ValueError, match="agent oracle: unknown option 'order'"):
        OracleAgent(e, order="recent")
