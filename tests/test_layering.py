"""The layering rule of docs/ARCHITECTURE.md, checked on every import in src/iba (module-level and
inside functions alike, so a lazy import cannot hide a dependency that points upwards)."""

from __future__ import annotations

import ast
from pathlib import Path

from iba.cli import COMMANDS

SRC = Path(__file__).resolve().parents[1] / "src"
DOC = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"

# lowest first; a module may import its own package and the layers below, never above or sideways
LAYERS: list[list[str]] = [
    ["iba", "types", "cancel", "cpus", "argtypes", "sqlite_wal", "atomic"],
    ["prompts", "llm", "taxonomy"],
    ["dataset", "retrieval"],
    ["agents", "eval", "batch"],
    ["construct", "adapters", "run"],
    ["report", "hf"],
    ["inspect", "submit"],
]
# it names implementations as strings and imports them on use, so every layer may use it
ANYWHERE = {"iba.registry"}

LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / "iba").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()
# the top layer may import anything: the dispatcher and the commands package (the modules it names
# and what they share)
TOP = {"iba.cli", *(m for m in MODULES if m == "iba.commands" or m.startswith("iba.commands."))}


def _unit(module: str) -> str:
    """'iba.eval.qa' -> 'eval'; 'iba.types' -> 'types'; 'iba' -> 'iba' (the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported iba module) for every import statement anywhere in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                # `from iba import prompts` imports the module iba.prompts, not the root package
                found.append((node.lineno, sub if sub in MODULES else base))
    return [(line, name) for line, name in found if name == "iba" or name.startswith("iba.")]


def _violations() -> list[str]:
    bad = []
    for module, path in MODULES.items():
        if module in TOP or module in ANYWHERE:
            continue
        mine = LAYER_OF[_unit(module)]
        for line, target in _imports(module, path):
            unit = _unit(target)
            if target in ANYWHERE or unit == _unit(module):
                continue
            if target in TOP:
                bad.append(f"{path.relative_to(SRC)}:{line}: {module} imports the command module {target}")
            elif LAYER_OF[unit] >= mine:
                where = "a higher layer" if LAYER_OF[unit] > mine else "its own layer"
                bad.append(f"{path.relative_to(SRC)}:{line}: {module} imports {target} ({where})")
    return bad


def test_every_package_has_a_layer():
    units = {_unit(m) for m in MODULES if m not in TOP and m not in ANYWHERE}
    assert units <= set(LAYER_OF), f"place these in LAYERS (and docs/ARCHITECTURE.md): {sorted(units - set(LAYER_OF))}"


def test_command_modules_exist_in_the_commands_package():
    named = {module for module, _ in COMMANDS.values()}
    assert all(m in MODULES for m in named), sorted(m for m in named if m not in MODULES)
    assert named <= TOP, sorted(named - TOP)


def test_no_import_points_up_or_sideways():
    assert _violations() == []


def test_the_checker_sees_lazy_imports(tmp_path):
    # an upward import inside a function must count as much as one at the top of a module
    path = tmp_path / "m.py"
    path.write_text("import iba.types\n\ndef f():\n    from iba.run.store import Store\n    from iba import prompts\n")
    assert _imports("iba.eval.m", path) == [(1, "iba.types"), (4, "iba.run.store"), (5, "iba.prompts")]


def test_the_doc_states_the_same_layers():
    text = DOC.read_text(encoding="utf-8")
    for i, names in enumerate(LAYERS):
        line = f"{i}  " + ", ".join(names)
        assert line in text, f"docs/ARCHITECTURE.md lacks the layer line {line!r}"
