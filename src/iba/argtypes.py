"""argparse types shared by every command: counts are >= 1, seconds are finite and > 0.

A count of 0 or less would run nothing or quietly drop work; argparse then says which option is
wrong and what it allows ("argument --k: must be >= 1, got 0"), exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T", int, float)


def _at_least(convert: Callable[[str], T], low: int, *, strict: bool, name: str, doc: str) -> Callable[[str], T]:
    """The parser of `convert`ed numbers >= low (> low when strict), finite; its errors say the bound."""
    bound = f"{'>' if strict else '>='} {low}"
    noun = "an integer" if convert is int else "a number"

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {noun} {bound}, got {text!r}") from None
        if not math.isfinite(value) or (value <= low if strict else value < low):  # type: ignore[operator]
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}" if convert is int
                                             else f"must be a finite number {bound}, got {text}")
        return value

    parse.__name__ = parse.__qualname__ = name  # argparse names the type in some messages
    parse.__doc__ = doc
    return parse


positive_int = _at_least(int, 1, strict=False, name="positive_int", doc="An integer >= 1.")
nonnegative_int = _at_least(int, 0, strict=False, name="nonnegative_int",
                            doc="An integer >= 0 (a number of retries or extra items, where none is a valid choice).")
positive_float = _at_least(float, 0, strict=True, name="positive_float", doc="A finite number > 0 (seconds, a ratio).")
nonnegative_float = _at_least(float, 0, strict=False, name="nonnegative_float",
                              doc="A finite number >= 0 (a sampling temperature).")


def out_folder(text: str) -> Path:
    """An output folder: it may exist (as a folder) or not yet; a file at that path, or a file
    where one of its parent folders should be, is refused before any work is done."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a folder")
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
            break
    return path
