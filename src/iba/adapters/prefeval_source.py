"""Reading PrefEval's benchmark folder (the layout of its `benchmark_dataset/`).

Only the shapes are defined here; the text stays in the user's folder (PrefEval is CC BY-NC 4.0,
so nothing of it is shipped). Every bad input is reported with its file and JSON path, and a
missing folder or topic lists what exists, so the user knows what to fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

FORMS: tuple[str, ...] = ("explicit", "choice", "persona")
# form -> folder holding one TOPIC.json per topic
FORM_DIRS: dict[str, str] = {
    "explicit": "explicit_preference",
    "choice": "implicit_preference/choice-based",
    "persona": "implicit_preference/persona-driven",
}
MCQ_DIR = "mcq_options"
FILLER_FILE = "filtered_inter_turns.json"


class PrefEvalError(ValueError):
    """The PrefEval folder, a topic or a record is missing or malformed (the message says which)."""


class _Rec(BaseModel):
    # PrefEval records carry extra keys in places (e.g. "fix"); they are irrelevant here
    model_config = ConfigDict(extra="ignore")


def _nonempty(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty")
    return v


class ExplicitItem(_Rec):
    preference: str
    question: str
    explanation: str = ""

    _check = field_validator("preference", "question")(_nonempty)


class ChoiceConversation(_Rec):
    query: str
    assistant_options: str
    user_selection: str
    assistant_acknowledgment: str

    _check = field_validator("query", "assistant_options", "user_selection")(_nonempty)


class ChoiceItem(ExplicitItem):
    conversation: ChoiceConversation
    aligned_op: str = ""


class PersonaExchange(_Rec):
    user: str
    assistant: str = ""

    _check = field_validator("user")(_nonempty)


class PersonaItem(ExplicitItem):
    persona: str = ""
    # PrefEval stores the exchanges as {"0": {...}, "1": {...}}; the keys give the order
    conversation: dict[str, PersonaExchange] = Field(min_length=1)

    @field_validator("conversation")
    @classmethod
    def _numeric_keys(cls, v: dict[str, PersonaExchange]) -> dict[str, PersonaExchange]:
        bad = [k for k in v if not k.isdigit()]
        if bad:
            raise ValueError(f"exchange keys must be '0', '1', ...; got {bad[:3]}")
        return v

    def exchanges(self) -> list[tuple[int, PersonaExchange]]:
        return sorted((int(k), e) for k, e in self.conversation.items())


class McqItem(ExplicitItem):
    classification_task_options: list[str] = Field(min_length=2)


class FillerMessage(_Rec):
    role: Literal["user", "assistant"]
    content: str


class FillerConversation(_Rec):
    conversation: list[FillerMessage] = Field(min_length=1)


ITEM_MODELS: dict[str, type[ExplicitItem]] = {"explicit": ExplicitItem, "choice": ChoiceItem, "persona": PersonaItem}


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise PrefEvalError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None


def _validate_list(path: Path, model: type[_Rec]) -> list[Any]:
    data = _load_json(path)
    if not isinstance(data, list):
        raise PrefEvalError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    out = []
    for i, rec in enumerate(data):
        try:
            out.append(model.model_validate(rec))
        except ValidationError as e:
            err = e.errors()[0]
            where = "".join(f"[{x!r}]" if isinstance(x, str) else f"[{x}]" for x in err["loc"])
            raise PrefEvalError(
                f"{path}: record [{i}]{where}: {err['msg']} (expected a {model.__name__} record as in PrefEval)"
            ) from None
    return out


def check_root(root: Path) -> Path:
    root = Path(root)
    if not root.is_dir():
        raise PrefEvalError(f"{root}: PrefEval folder not found (pass the folder that holds explicit_preference/)")
    return root


def list_topics(root: Path, form: str) -> list[str]:
    """Topics available for `form` (the TOPIC.json files of its folder)."""
    if form not in FORM_DIRS:
        raise PrefEvalError(f"unknown form {form!r}; choose from: {', '.join(FORMS)}")
    folder = check_root(root) / FORM_DIRS[form]
    if not folder.is_dir():
        found = sorted(p.name for p in root.iterdir())
        raise PrefEvalError(
            f"{folder}: missing; a PrefEval folder has {', '.join(FORM_DIRS.values())}, {MCQ_DIR}/ and "
            f"{FILLER_FILE}; {root} has: {', '.join(found) or '(nothing)'}"
        )
    return sorted(p.stem for p in folder.glob("*.json"))


def resolve_topics(root: Path, form: str, topics: list[str] | None) -> list[str]:
    available = list_topics(root, form)
    if not available:
        raise PrefEvalError(f"{root / FORM_DIRS[form]}: no TOPIC.json files")
    if not topics:
        return available
    unknown = [t for t in topics if t not in available]
    if unknown:
        raise PrefEvalError(
            f"unknown topic(s) {', '.join(unknown)} in {root / FORM_DIRS[form]}; available: {', '.join(available)}"
        )
    return list(dict.fromkeys(topics))  # keep the user's order, drop repeats


def load_items(root: Path, form: str, topic: str) -> list[ExplicitItem]:
    return _validate_list(root / FORM_DIRS[form] / f"{topic}.json", ITEM_MODELS[form])


def load_mcq(root: Path, topic: str) -> list[McqItem] | None:
    """The topic's MCQ records, or None when the topic has no mcq_options file."""
    path = root / MCQ_DIR / f"{topic}.json"
    return _validate_list(path, McqItem) if path.exists() else None


def load_filler(root: Path) -> list[list[FillerMessage]]:
    path = root / FILLER_FILE
    if not path.exists():
        raise PrefEvalError(f"{path}: missing; the filler messages come from PrefEval's {FILLER_FILE}")
    convs = [c.conversation for c in _validate_list(path, FillerConversation)]
    return [c for c in convs if any(m.content.strip() for m in c)]
