"""Split a user history into retrieval units: token windows (256/50, the paper's C.3), turns, sessions,
or windows plus user turns (mixed).

Each turn is rendered as one line `[YYYY-MM-DD role] text` so the date and speaker travel with the
words (recency matters for preferences that change). Token windows are counted with the
embedder's own tokenizer; a window that starts inside a turn repeats that turn's prefix, and the
prefix counts against the window's budget, so no unit exceeds `size` tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from iba.retrieval.passage import Chunk, Unit
from iba.types import Turn

TokenSpans = Callable[[str], list[tuple[int, int]]]

CHUNK_TOKENS = 256
CHUNK_OVERLAP = 50


def turn_prefix(turn: Turn) -> str:
    return f"[{turn.timestamp[:10]} {turn.role}] "


def turn_line(turn: Turn) -> str:
    return turn_prefix(turn) + " ".join(turn.text.split())


def turn_body(turn: Turn) -> str:
    """What a turn unit embeds: speaker and words, no date. The date is metadata (the chunk's text
    and timestamps keep it); leaving it out lets the same message in another history, or on
    another day, share one vector (retrieval/text_vectors.py)."""
    return f"{turn.role}: " + " ".join(turn.text.split())


def turn_units(history: Sequence[Turn]) -> list[Chunk]:
    return [
        Chunk(id=f"c{i:05d}", text=turn_line(t), turn_ids=[t.id], timestamps=[t.timestamp])
        for i, t in enumerate(history)
    ]


def user_turn_units(history: Sequence[Turn]) -> list[Chunk]:
    """One unit per user turn, ids `u<position in history>` (they sit beside windows in a mixed index)."""
    return [
        Chunk(id=f"u{i:05d}", text=turn_line(t), turn_ids=[t.id], timestamps=[t.timestamp])
        for i, t in enumerate(history)
        if t.role == "user"
    ]


def session_units(history: Sequence[Turn]) -> list[Chunk]:
    groups: dict[str, list[Turn]] = {}
    for t in history:
        groups.setdefault(t.session_id, []).append(t)
    return [
        Chunk(
            id=f"c{i:05d}",
            text="\n".join(turn_line(t) for t in turns),
            turn_ids=[t.id for t in turns],
            timestamps=[t.timestamp for t in turns],
        )
        for i, turns in enumerate(groups.values())
    ]


def token_chunks(
    history: Sequence[Turn], token_spans: TokenSpans, size: int = CHUNK_TOKENS, overlap: int = CHUNK_OVERLAP
) -> list[Chunk]:
    """Sliding windows of `size` tokens, consecutive windows sharing `overlap` tokens."""
    if not 0 <= overlap < size:
        raise ValueError(f"need 0 <= overlap < size, got size={size} overlap={overlap}")
    lines = [turn_line(t) for t in history]
    # the stream: (turn index, char start, char end) per token, over all turn lines in order
    stream: list[tuple[int, int, int]] = []
    first_body: list[int] = []  # per turn: stream index of its first token after the prefix
    prefix_tokens: list[int] = []
    for i, (turn, line) in enumerate(zip(history, lines)):
        plen = len(turn_prefix(turn))
        spans = token_spans(line)
        n_prefix = sum(1 for s, _ in spans if s < plen)
        prefix_tokens.append(n_prefix)
        first_body.append(len(stream) + n_prefix)
        stream.extend((i, s, e) for s, e in spans)
    if any(p >= size - overlap for p in prefix_tokens):
        raise ValueError(f"chunk size {size} is too small for the turn prefixes")

    chunks: list[Chunk] = []
    pos = 0
    while pos < len(stream):
        turn_idx = stream[pos][0]
        if pos < first_body[turn_idx]:
            pos = first_body[turn_idx] - prefix_tokens[turn_idx]  # inside a prefix: start at the line start
        starts_mid_turn = pos > first_body[turn_idx]
        budget = size - (prefix_tokens[turn_idx] if starts_mid_turn else 0)
        end = min(len(stream), pos + budget)
        chunks.append(_window(history, lines, stream, pos, end, starts_mid_turn, len(chunks)))
        if end >= len(stream):
            break
        pos = end - overlap
    return chunks


def _window(
    history: Sequence[Turn],
    lines: list[str],
    stream: list[tuple[int, int, int]],
    start: int,
    end: int,
    starts_mid_turn: bool,
    n: int,
) -> Chunk:
    first, last = stream[start][0], stream[end - 1][0]
    parts = []
    for i in range(first, last + 1):
        line = lines[i]
        a = stream[start][1] if i == first else 0
        b = stream[end - 1][2] if i == last else len(line)
        piece = line[a:b]
        if i == first and starts_mid_turn:
            piece = turn_prefix(history[i]) + piece
        parts.append(piece)
    covered = history[first : last + 1]
    return Chunk(
        id=f"c{n:05d}",
        text="\n".join(parts),
        turn_ids=[t.id for t in covered],
        timestamps=[t.timestamp for t in covered],
    )


def make_units(
    history: Sequence[Turn],
    unit: Unit,
    token_spans: TokenSpans,
    size: int = CHUNK_TOKENS,
    overlap: int = CHUNK_OVERLAP,
) -> list[Chunk]:
    if unit == "token":
        return token_chunks(history, token_spans, size, overlap)
    if unit == "turn":
        return turn_units(history)
    if unit == "session":
        return session_units(history)
    if unit == "mixed":
        return token_chunks(history, token_spans, size, overlap) + user_turn_units(history)
    raise ValueError(f"unknown chunk unit {unit!r}; choose token, turn, session or mixed")
