"""The LLM judge of Generate(text) checkpoints (paper Appendix A.2, C.2).

One binary verdict with a short rationale per checkpoint per judge call, as in the paper
(`judge_checkpoint.jinja`). The judge sees the final response and the checkpoint requirement only;
never the agent's trace, the user's history or the task, so it cannot be swayed by the agent's
reasoning. `judge_checkpoints_batch` judges all checkpoints of a response in one call, a cheaper
option for paid judges that is not the paper's protocol.

Failures are never scores: an unparseable reply is retried once by `complete_json`, then the
verdict is `passed=None` (unscored: the evaluator's side). A crashed call (LLMError: server down,
5xx after the client's retries, a timeout) is retried once here; after that the verdict is
`passed=None, errored=True`: an infrastructure fault, not a verdict, which the next `iba run` or
`iba score` judges again (iba.eval.scoring).
A response longer than the judge's context window is cut to fit, and the prompt says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from iba import prompts
from iba.llm.base import Backend, LLMError
from iba.types import Checkpoint, Usage, Verdict

TEMPLATE = "judge_checkpoint"
BATCH_TEMPLATE = "judge_checkpoints_batch"
_MIN_RESPONSE_TOKENS = 32  # below this there is nothing left worth judging


class CheckpointJudgement(BaseModel):
    """The JSON a judge must return for one checkpoint."""

    passed: bool
    rationale: str = ""


class BatchItem(BaseModel):
    id: str
    passed: bool
    rationale: str = ""


class BatchJudgement(BaseModel):
    verdicts: list[BatchItem]


@dataclass(frozen=True)
class JudgeSettings:
    """Sampling settings of one judging pass; the panel varies `seed` per repeat."""

    max_tokens: int = 256
    temperature: float = 0.0
    seed: int = 42


# --------------------------------------------------------------------------- context budget


def fit_response(backend: Backend, response: str, overhead_tokens: int, max_tokens: int) -> tuple[str, str]:
    """Cut `response` so that prompt + reply fit the judge's context window.

    Returns (text, note); the note is empty when nothing was cut. Raises ValueError when the
    window cannot hold even a short response.
    """
    budget = backend.context_window - overhead_tokens - max_tokens - 16
    if budget < _MIN_RESPONSE_TOKENS:
        raise ValueError(f"the judge's context window ({backend.context_window} tokens) is too small for the prompt")
    if backend.count_tokens(response) <= budget:
        return response, ""
    cut = response
    for _ in range(8):  # token counts are not linear in characters; shrink until it fits
        ratio = budget / max(1, backend.count_tokens(cut))
        cut = cut[: max(1, int(len(cut) * ratio * 0.95))]
        if backend.count_tokens(cut) <= budget:
            break
    note = (f"The response was truncated to fit the evaluator's context window: only its first "
            f"{len(cut)} of {len(response)} characters are shown. Judge what is shown.")
    return cut, note


def _overhead(backend: Backend, prompt: prompts.Prompt) -> int:
    return sum(backend.count_tokens(m["content"]) + 8 for m in prompt.messages)


def _checkpoint_vars(c: Checkpoint) -> dict[str, Any]:
    return {"id": c.id, "dimension_name": c.dimension_name, "requirement": c.expected,
            "superseded": c.superseded or ""}


# --------------------------------------------------------------------------- calls


async def _ask(backend: Backend, messages: list[dict[str, Any]], schema: type[BaseModel],
               settings: JudgeSettings) -> tuple[BaseModel | None, Usage, str, bool, str | None]:
    """complete_json with one extra try after a crash; (None, usage, error, fault, None) when it
    fails, fault True when the call itself failed (infrastructure), False for an unparseable reply.
    The last item: the model a batch result says answered (Completion.answered_by), if any."""
    from iba.llm.structured import StructuredOutputError, complete_json

    usage, error = Usage(), ""
    for attempt in range(2):
        try:
            obj, completions = await complete_json(
                backend, messages, schema,
                max_tokens=settings.max_tokens, temperature=settings.temperature, seed=settings.seed,
            )
            for c in completions:
                usage = usage.add(c.usage())
            return obj, usage, "", False, next((c.answered_by for c in completions if c.answered_by), None)
        except StructuredOutputError as e:  # already retried once with the parse error
            for c in getattr(e, "completions", None) or []:
                usage = usage.add(c.usage())
            return None, usage, f"unparseable judge output after a retry: {str(e)[:300]}", False, None
        except LLMError as e:
            error = f"judge call failed{' again' if attempt else ''}: {str(e)[:300]}"
    return None, usage, error, True, None


async def judge_checkpoint(
    backend: Backend, response: str, checkpoint: Checkpoint, *, repeat: int = 0,
    settings: JudgeSettings = JudgeSettings(),
) -> tuple[Verdict, Usage]:
    """One verdict of `backend` on one checkpoint of `response`."""
    def verdict(passed: bool | None, rationale: str, prompt_hash: str | None, errored: bool = False) -> Verdict:
        return Verdict(target=checkpoint.id, kind="checkpoint", judge=backend.model_id, repeat=repeat,
                       passed=passed, rationale=rationale, prompt_hash=prompt_hash, errored=errored)

    variables = _checkpoint_vars(checkpoint)
    bare = prompts.render(TEMPLATE, response="", truncated="", **variables)
    try:
        text, note = fit_response(backend, response, _overhead(backend, bare) + 60, settings.max_tokens)
    except ValueError as e:
        return verdict(None, str(e), bare.hash), Usage()
    prompt = prompts.render(TEMPLATE, response=text, truncated=note, **variables)
    obj, usage, error, fault, answered_by = await _ask(backend, prompt.messages, CheckpointJudgement, settings)
    if obj is None:
        return verdict(None, error, prompt.hash, fault), usage
    assert isinstance(obj, CheckpointJudgement)
    rationale = obj.rationale.strip()[:1000] + (" [judged a truncated response]" if note else "")
    return verdict(obj.passed, rationale, prompt.hash).model_copy(update={"answered_by": answered_by}), usage


async def judge_checkpoints_batch(
    backend: Backend, response: str, checkpoints: list[Checkpoint], *, repeat: int = 0,
    settings: JudgeSettings = JudgeSettings(),
) -> tuple[list[Verdict], Usage]:
    """All checkpoints in one call; a checkpoint missing from the reply is unscored."""
    variables = [_checkpoint_vars(c) for c in checkpoints]
    bare = prompts.render(BATCH_TEMPLATE, response="", truncated="", checkpoints=variables)
    # the reply holds one verdict per checkpoint, so it needs room in proportion
    max_tokens = max(settings.max_tokens, 96 * len(checkpoints))
    settings = JudgeSettings(max_tokens=max_tokens, temperature=settings.temperature, seed=settings.seed)

    def unscored(why: str, h: str, errored: bool = False) -> list[Verdict]:
        return [Verdict(target=c.id, kind="checkpoint", judge=backend.model_id, repeat=repeat, passed=None,
                        rationale=why, prompt_hash=h, errored=errored) for c in checkpoints]

    try:
        text, note = fit_response(backend, response, _overhead(backend, bare) + 60, max_tokens)
    except ValueError as e:
        return unscored(str(e), bare.hash), Usage()
    prompt = prompts.render(BATCH_TEMPLATE, response=text, truncated=note, checkpoints=variables)
    obj, usage, error, fault, answered_by = await _ask(backend, prompt.messages, BatchJudgement, settings)
    if obj is None:
        return unscored(error, prompt.hash, fault), usage
    assert isinstance(obj, BatchJudgement)
    by_id: dict[str, BatchItem] = {}
    for item in obj.verdicts:
        by_id.setdefault(item.id.strip(), item)  # a repeated id: the first answer counts
    out = []
    for v in unscored("the judge gave no verdict for this checkpoint", prompt.hash):
        item = by_id.get(v.target)
        out.append(v if item is None else v.model_copy(update={
            "passed": item.passed, "rationale": item.rationale.strip()[:1000], "answered_by": answered_by}))
    return out, usage
