"""Reading an export back: an `iba export hf` folder, or a Hugging Face hub id, as an IBA dataset folder.

`dataset_dir(arg, cache_dir)` is what commands call on their dataset argument: an IBA folder is
returned as it is; an export folder (it holds iba_manifest.json) is materialised once into
`<cache_dir>/hf-datasets/<name>-<content hash>/` (jsonl files, as `iba build` writes them) and that
folder is returned; `hf:owner/name` is downloaded from the Hub with huggingface_hub (only then, and
only with the `hf:` prefix: the one network use, for users who are online) and materialised the
same way. A path that does not exist is an error, never a download (`bad/x` is a typo far more
often than a hub id). Reading needs pyarrow only.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from iba.dataset import Dataset, DatasetError, atomic_write_text, write_dataset
from iba.hf import HFError, require_pyarrow
from iba.hf.export import MANIFEST
from iba.hf.tables import CONFIGS, Config, parquet_path
from iba.types import Manifest, Turn

_HUB_ID = re.compile(r"^hf:([A-Za-z0-9][\w.-]*/[\w.-]+)$")
# what a materialised folder holds; part of its cache name, so a folder written by an older layout
# (personas.jsonl with the states in it) is never reused
LAYOUT = "iba-materialised/2"


def is_export(path: Path) -> bool:
    return path.is_dir() and (path / MANIFEST).is_file()


def _fingerprint(root: Path) -> str:
    """A hash of every file the export's content depends on (names and bytes)."""
    h = hashlib.sha256(LAYOUT.encode() + b"\0")
    for path in sorted(p for p in root.rglob("*") if p.is_file() and (p.suffix == ".parquet" or p.name == MANIFEST)):
        h.update(str(path.relative_to(root)).encode() + b"\0")
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def read_config(root: Path, config: Config) -> list[Any] | None:
    """The records of one config (None when the export does not hold it: a held-back key);
    a row that does not validate is an HFError naming the file and row."""
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    path = root / parquet_path(config.name)
    if not path.exists():
        return None
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as e:
        raise HFError(f"{path}: cannot read as parquet: {e}") from None
    out = []
    for i, row in enumerate(rows):
        try:
            out.append((row, config.from_row(row)))
        except (ValueError, TypeError, KeyError) as e:
            raise HFError(f"{path}: row {i}: invalid {config.model.__name__}: {str(e).splitlines()[0]}") from None
    return out


def materialise(export: Path, target: Path) -> Path:
    """Write the IBA dataset folder of `export` into `target` (atomically: a temporary folder
    renamed into place), unless it is already there."""
    if (target / "manifest.json").exists():
        return target
    try:
        manifest = Manifest.model_validate_json((export / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise HFError(f"{export / MANIFEST}: not a valid IBA manifest: {str(e).splitlines()[0]}") from None
    configs = {c.name: read_config(export, c) for c in CONFIGS}
    for required in ("instances", "histories", "personas"):
        if configs[required] is None:
            raise HFError(f"{export}: no {parquet_path(required)}; not a complete export")
    histories: dict[str, list[Turn]] = {}
    for row, turn in sorted(configs["histories"], key=lambda rt: (rt[0]["user_id"], rt[0]["position"])):
        histories.setdefault(row["user_id"], []).append(turn)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        keys = [k for _, k in configs["answer_key"] or []]
        distractors = [d for _, d in configs["distractors"]] if configs["distractors"] is not None else None
        # the states go back beside the key (write_dataset writes them to persona_states.jsonl);
        # held back: none, and an export from before the split brings its own in `personas`
        states = {s.user_id: s.states for _, s in configs["persona_states"] or []}
        personas = [p.model_copy(update={"states": states[p.id]}) if p.id in states else p
                    for _, p in configs["personas"]]
        write_dataset(tmp, manifest, personas, histories,
                      [t for _, t in configs["instances"]], keys, distractors)
        if configs["answer_key"] is None:  # held back: no key at all, rather than an empty one
            (tmp / "answer_key.jsonl").unlink()
        if (export / "stats.json").exists():
            atomic_write_text(tmp / "stats.json", (export / "stats.json").read_text(encoding="utf-8"))
        try:
            tmp.rename(target)
        except OSError:  # another process materialised it first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def hub_download(repo_id: str) -> Path:
    """The Hub snapshot of dataset `repo_id` (huggingface_hub's own cache); online users only."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HFError(f"{repo_id!r} is not a folder; to read it as a Hugging Face hub id, pip install 'iba[hf]'") from None
    try:
        return Path(snapshot_download(repo_id=repo_id, repo_type="dataset"))
    except Exception as e:  # noqa: BLE001 - offline, unknown repo, gated: all say why in their message
        raise HFError(f"{repo_id!r} is not a folder, and downloading it from the Hugging Face Hub failed: "
                      f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None


def dataset_dir(arg: str | Path, cache_dir: str | Path = ".iba-cache") -> Path:
    """The IBA dataset folder behind a command's dataset argument (see the module doc)."""
    path = Path(arg)
    m = _HUB_ID.match(str(arg))
    if m is not None:
        path = hub_download(m.group(1))
        if not is_export(path):
            raise HFError(f"hub dataset {m.group(1)!r} is not an IBA-Bench export (no {MANIFEST})")
    elif not path.exists():
        hint = f"; for the Hugging Face hub dataset of that name write hf:{arg}" if re.fullmatch(r"[\w.-]+/[\w.-]+", str(arg)) else ""
        raise HFError(f"{arg}: no such dataset folder{hint}")
    if not is_export(path):
        return path
    name = re.sub(r"[^\w.-]+", "_", path.resolve().name)[:60]
    return materialise(path, Path(cache_dir) / "hf-datasets" / f"{name}-{_fingerprint(path)}")


def open_dataset(arg: str | Path, cache_dir: str | Path = ".iba-cache", *, answer_key: str | Path | None = None) -> Dataset:
    """A Dataset from any dataset argument; HFError and DatasetError say what is wrong."""
    try:
        return Dataset(dataset_dir(arg, cache_dir), answer_key=answer_key)
    except HFError as e:
        raise DatasetError(str(e)) from None


__all__ = ["dataset_dir", "is_export", "materialise", "open_dataset", "read_config"]
