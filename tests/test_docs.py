"""The docs say what the code does: every agent spec they quote builds (or is refused where they say
so), every `iba` command line in a code block parses with the real argparse, every option an inline
`iba CMD ...` names exists, every package of src/iba is on the layout lists, and every version pin
they quote for a dependency is pyproject's."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from iba.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
AGENTS = ("iba-fc", "iba", "rag", "direct", "external")
# specs the README quotes as examples of what is refused (options that would change nothing)
REFUSED = {"iba?retrieval=false&k=3", "iba?btda=false&compact=none", "iba?reranker=rules&max_candidates=4",
           "iba?unit=turn&size=64", "iba-fc?btda=false", "rag?k=5&budget=2000", "rag?k=0"}
# placeholders in command lines, as a user would fill them in
FILL = {"N": "2000", "P": "2", "K": "2", "S": "1"}


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def command_lines(path: Path) -> list[str]:
    """The `iba ...` lines of a file's code blocks (continuations joined, prompts and env stripped)."""
    out, block, joined = [], False, ""
    for raw in _text(path).splitlines():
        if raw.lstrip().startswith("```"):
            block = not block
            continue
        if not block:
            continue
        joined += raw.rstrip().removesuffix("\\") + " "
        if raw.rstrip().endswith("\\"):
            continue
        line, joined = joined.strip(), ""
        if re.match(r"^(\w+=\S+\s+)*(\.venv/bin/)?iba\s", line):
            out.append(line)
    return out


def _argv(line: str) -> list[str]:
    words = shlex.split(line.split(" | ")[0].split(" && ")[0], comments=True)
    while words and re.match(r"^\w+=", words[0]):  # VAR=value before the command
        words.pop(0)
    words = [w for w in words if w != "&"]
    return [FILL.get(w, w) for w in words[1:]]


def quoted_specs() -> set[str]:
    pattern = re.compile(r"`((?:%s)\?[^`\s]*)`" % "|".join(re.escape(a) for a in AGENTS))
    out = set()
    for path in DOCS:
        out |= set(pattern.findall(_text(path)))
        for line in command_lines(path):
            argv = _argv(line)
            out |= {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--agent"}
    return {re.sub(r"=([A-Z])(?=&|$)", lambda m: "=" + FILL.get(m.group(1), m.group(1)), s) for s in out}


def _env(tmp_path: Path):
    from iba.agents.base import AgentEnv
    from tests.fakes import ScriptedBackend

    return AgentEnv(backend=ScriptedBackend([]), cache_dir=tmp_path)


@pytest.mark.parametrize("spec", sorted(quoted_specs()))
def test_every_agent_spec_the_docs_quote_builds(spec, tmp_path, monkeypatch):
    """README quoted `compact=rules` after it was refused; a quoted spec now has to build."""
    from iba.run.runner import make_agent

    monkeypatch.chdir(ROOT)  # external?cmd=python examples/... is relative to the repository
    if spec in REFUSED:
        with pytest.raises(ValueError):
            make_agent(spec, _env(tmp_path))
    else:
        make_agent(spec, _env(tmp_path))


def _parser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    importlib.import_module(COMMANDS[command][0]).add_arguments(sub.choices[command])
    return parser


CODE_LINES = [(p.name, line) for p in DOCS + [ROOT / "bench" / "BENCHMARKS.md"] if p.exists()
              for line in command_lines(p) if p.name != "BENCHMARKS.md"]


@pytest.mark.parametrize("where,line", CODE_LINES)
def test_every_iba_command_line_in_a_code_block_parses(where, line):
    argv = _argv(line)
    assert argv and argv[0] in COMMANDS, f"{where}: {line}"
    try:
        _parser(argv[0]).parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `{line}` does not parse (see the message above)")


def inline_commands() -> list[tuple[str, str, list[str]]]:
    """(file, command, --options named) of every inline `iba CMD ...` span."""
    out = []
    for path in DOCS:
        for span in re.findall(r"`(?:\.venv/bin/)?iba ([a-z-]+)((?: [^`]*)?)`", _text(path).replace("\\|", "|")):
            command, rest = span
            if command in COMMANDS:
                out.append((path.name, command, re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest)))
    return out


@pytest.mark.parametrize("where,command,options", inline_commands())
def test_every_option_an_inline_command_names_exists(where, command, options):
    """e.g. docs/scaling.md said judge-check reads --base-url for its judge (it reads --judge-base-url)."""
    parser = _parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    known = {o for a in sub._actions for o in a.option_strings}
    for s in [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]:  # iba batch status|...
        known |= {o for p in s.choices.values() for a in p._actions for o in a.option_strings}
    assert set(options) <= known, f"{where}: `iba {command}` has no {sorted(set(options) - known)}"


def test_every_package_is_on_the_layout_lists():
    """README's layout list omitted batch, hf, inspect, submit and commands."""
    packages = sorted(p.parent.name for p in (ROOT / "src" / "iba").glob("*/__init__.py"))
    readme = _text(ROOT / "README.md").split("## Layout")[1].split("\n## ")[0]
    arch = _text(ROOT / "docs" / "ARCHITECTURE.md")
    for name in packages:
        assert re.search(rf"\b{name}\b", readme), f"README's Layout does not name {name}/"
        assert f"  {name}/" in arch, f"docs/ARCHITECTURE.md's layout does not list {name}/"


def test_quoted_version_pins_are_pyprojects():
    """BENCHMARKS pinned inspect-ai>=0.3.100 while pyproject asked for >=0.3.285."""
    project = tomllib.loads(_text(ROOT / "pyproject.toml"))["project"]
    pins = {}
    for req in [*project["dependencies"], *(r for v in project["optional-dependencies"].values() for r in v)]:
        m = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?>=([0-9][0-9.]*)$", req.split(";")[0].strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    for path in [*DOCS, ROOT / "bench" / "BENCHMARKS.md"]:
        for name, version in re.findall(r"'([A-Za-z0-9_.-]+)>=([0-9][0-9.]*)'", _text(path)):
            if name.lower() in pins:
                assert version == pins[name.lower()], f"{path.name} quotes {name}>={version}, pyproject {pins[name.lower()]}"
