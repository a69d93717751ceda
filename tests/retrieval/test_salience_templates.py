"""The retriever must not be tuned to the builder: no cue pattern of the rule scorer may match the
builder's own wording (every evidence wrapper, connector, reaction prefix, suffix, opener, draft and
reply of iba.construct.evidence_bank, rendered with an empty cue)."""

import re

import pytest

from iba.construct import evidence_bank
from iba.retrieval import salience

BANKS = {name: getattr(evidence_bank, name) for name in dir(evidence_bank)
         if name.isupper() and isinstance(getattr(evidence_bank, name), tuple)}


def test_the_banks_are_found():
    assert {"EXPLICIT_REVISION", "COMPLAINT", "DIRECT_STATEMENT", "IMPLICIT_PATTERN", "CONNECTORS",
            "REACTION_PREFIXES", "SUFFIXES"} <= set(BANKS)


@pytest.mark.parametrize("bank", sorted(BANKS))
def test_no_cue_pattern_matches_a_builder_template(bank):
    hits = []
    for template in BANKS[bank]:
        text = template.replace("{cue}", "").replace("{Cue}", "")
        for kind, patterns in salience._CUES.items():
            hits += [(template, kind, p) for p in patterns if re.search(p, text, re.I)]
    assert not hits, f"cue patterns that match {bank}: {hits[:5]}"
