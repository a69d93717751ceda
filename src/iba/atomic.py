"""Files written whole or not at all: a temporary file beside the target, renamed into place."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


@contextmanager
def atomic_file(path: Path, mode: str = "w", *, prefix: str | None = None, suffix: str = ".tmp",
                fsync: bool = False, chmod: int | None = None) -> Iterator[IO[Any]]:
    """`path` written through a temporary file in its folder, which replaces it when the block ends
    (os.replace: a reader, or a racing process, sees the old file or the whole new one); one that
    raises leaves `path` as it was and the temporary file removed. `chmod`: mkstemp makes 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}." if prefix is None else prefix, suffix=suffix)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        if chmod is not None:
            os.chmod(tmp, chmod)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
