"""IBA-Bench datasets as Hugging Face dataset repositories, both ways.

`iba export hf DIR OUT` writes parquet per config (instances, histories, personas; the answer key and
the distractor labels each as a config of their own, so a public release can hold them back) and a
dataset card; `iba run OUT` (or a hub id, hf:owner/name) reads such a folder back into an IBA dataset folder.
Needs the `hf` extra (pyarrow; `datasets` for the card's features and for users' loading).
"""

from __future__ import annotations

from typing import Any


class HFError(ValueError):
    """A Hugging Face export that cannot be written or read (the message names the file)."""


def require_pyarrow() -> Any:
    """pyarrow and pyarrow.parquet, or an error naming the extra that installs them."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise HFError("Hugging Face export needs pyarrow: pip install 'iba[hf]'") from None
    return pyarrow
