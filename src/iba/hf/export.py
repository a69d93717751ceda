"""`iba export hf DIR OUT`: an IBA dataset folder as a Hugging Face dataset repository.

Layout of OUT (upload it as is with `huggingface-cli upload --repo-type dataset NAME OUT`):

    README.md                                   the dataset card (YAML: configs, features, license, iba: ...)
    <config>/test-00000-of-00001.parquet        instances, histories, personas (public); answer_key,
                                                distractors, persona_states (evaluator-only)
    iba_manifest.json                           the dataset's manifest.json, verbatim (run keys hash it)
    stats.json                                  Table 2 statistics and the tell audit

With `hold_back`, the evaluator-only configs (answer key, distractor labels, persona states) are not
written, nor the tell audit's n-grams (read off the evidence labels): a public release whose test
split stays hidden; score it with `iba run OUT --answer-key DIR/answer_key.jsonl`, where DIR (the
exported dataset folder) keeps the other hidden files beside the key.
The export is written into a temporary folder beside OUT and renamed into place, so OUT is either
the old export or the complete new one.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from iba.dataset import Dataset, atomic_write_text, read_jsonl
from iba.hf import HFError, require_pyarrow
from iba.hf.card import dataset_card
from iba.hf.tables import (ANSWER_KEY, CONFIGS, DISTRACTORS, HISTORIES, INSTANCES, PERSONA_STATES, PERSONAS, Config,
                           parquet_path)
from iba.types import DistractorLabel, PersonaStates

MANIFEST = "iba_manifest.json"


def _write(pa: Any, root: Path, config: Config, rows: list[dict[str, Any]]) -> dict[str, Any]:
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=config.schema(pa))
    path = root / parquet_path(config.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")
    return {"name": config.name, "rows": table.num_rows, "bytes": path.stat().st_size, "schema": table.schema,
            "memory_bytes": table.nbytes}


def export_hf(src: str | Path, out: str | Path, *, hold_back: bool = False, license: str | None = None,
              pretty_name: str | None = None) -> dict[str, Any]:
    """Write the export of dataset `src` to `out` (replacing an earlier export there); returns a
    summary: configs written (rows, bytes), configs held back, the card's path."""
    pa = require_pyarrow()
    src, out = Path(src), Path(out)
    ds = Dataset(src)
    ds.check()  # a broken dataset is reported with file:line here, not after a partial export
    if out.resolve() == src.resolve() or src.resolve() in out.resolve().parents:
        raise HFError(f"{out}: write the export outside the dataset folder {src}")
    if out.exists() and not out.is_dir():
        raise HFError(f"{out}: exists and is not a folder")
    if out.exists() and not (out / MANIFEST).exists() and any(out.iterdir()):
        raise HFError(f"{out}: exists and is not an earlier export (no {MANIFEST}); choose an empty or new folder")
    from iba.construct.stats import compute_stats

    stats = compute_stats(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        written = [
            _write(pa, tmp, INSTANCES, [INSTANCES.to_row(t) for t in ds.instances]),
            _write(pa, tmp, HISTORIES, [
                HISTORIES.to_row(turn) | {"user_id": user, "position": i}
                for user in sorted(ds.personas) if ds.history_path(user).exists()
                for i, turn in enumerate(ds.history(user))
            ]),
            _write(pa, tmp, PERSONAS, [PERSONAS.to_row(p) for p in ds.personas.values()]),
        ]
        held: list[str] = []
        hidden: list[tuple[Config, list[dict[str, Any]]]] = [
            (ANSWER_KEY, [ANSWER_KEY.to_row(k) for k in ds.answer_keys().values()])]
        if ds.distractors_path.exists():
            hidden.append((DISTRACTORS, [DISTRACTORS.to_row(d) for d in read_jsonl(ds.distractors_path, DistractorLabel)]))
        states = ds.persona_states()  # the hidden file, or the states an older personas.jsonl carried
        if states:
            hidden.append((PERSONA_STATES, [PERSONA_STATES.to_row(PersonaStates(user_id=u, states=v))
                                            for u, v in sorted(states.items())]))
        for config, rows in hidden:
            if hold_back:
                held.append(config.name)
            else:
                written.append(_write(pa, tmp, config, rows))
        if hold_back:
            stats = public_stats(stats)
        atomic_write_text(tmp / MANIFEST, ds.manifest.model_dump_json(indent=2) + "\n")
        atomic_write_text(tmp / "stats.json", json.dumps(stats, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        card = dataset_card(ds.manifest, stats, written, held, license=license, pretty_name=pretty_name)
        atomic_write_text(tmp / "README.md", card)
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"configs": {w["name"]: {"rows": w["rows"], "bytes": w["bytes"]} for w in written},
            "held_back": held, "card": str(out / "README.md")}


def public_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """The statistics a public (held-back) release shows: all but the tell audit's top evidence
    n-grams, which are read off the evidence labels of the key it holds back."""
    audit = stats.get("tell_audit")
    if not audit or "top_evidence_features" not in (audit.get("classifier") or {}):
        return stats
    classifier = {k: v for k, v in audit["classifier"].items() if k != "top_evidence_features"}
    return {**stats, "tell_audit": {**audit, "classifier": classifier}}


__all__ = ["CONFIGS", "MANIFEST", "export_hf", "public_stats"]
