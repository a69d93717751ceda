"""Imported by inspect_ai through the `inspect_ai` entry point: registers `iba/iba_bench`."""

from iba.inspect.task import iba_bench  # noqa: F401
