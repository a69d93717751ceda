"""IBA-Agent, the function-calling variant: an LLM controller picks the IBA tools in a loop until it
calls the task's final output head (paper section 4.1).

- Tools: search_history, expand_queries, rerank_evidence, extract_preferences, plan_alignment and
  final_output (generate: runs synthesis; call_api: its arguments ARE the API params, checked
  against the schema).
- Bounded: at most `max_steps` controller calls (default 8); at the bound the final tool is forced
  (`tool_choice="final_output"`), with one more forced try if its arguments were invalid.
- Bad arguments (schema violations, unknown tools) go back to the controller as the tool result;
  anything else a tool raises (a bug, a model that never returns valid JSON) aborts the action.
- `choice=auto` lets the model choose; a reply without a tool call makes the next step force the
  next tool of the default plan, so small models still progress. `choice=plan` forces that plan
  at every step (the model only writes arguments).
- The pipeline's ablation switches (retrieval, btda, synthesis) are rejected: the controller, not
  the spec, decides which tools run. Previews cut a passage to PREVIEW_CHARS and mark the cut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from iba.agents.answer import check_task, make_action
from iba.agents.api_params import decoding_schema, validate_params
from iba.agents.base import Agent, AgentError
from iba.agents.iba_options import IBAOptions, explicit
from iba.agents.preferences import preference_lines
from iba.agents.toolkit import Toolkit
from iba.agents.trace import Trace
from iba.llm.base import ToolCall, ToolSpec
from iba.llm.structured import describe_errors
from iba.llm.toolcalls import assistant_message, tool_result_message
from iba.prompts import Prompt, render
from iba.retrieval.views import CUT
from iba.types import Action, TaskView, Turn

FINAL = "final_output"
PLAN = ["search_history", "expand_queries", "rerank_evidence", "extract_preferences", "plan_alignment", FINAL]
PREVIEW_CHARS = 220  # passage text shown to the controller per hit (its context grows every step)


PIPELINE_ONLY = ("retrieval", "btda", "synthesis", "preset")  # the pipeline's switches; the controller picks tools instead


class FCOptions(IBAOptions):
    max_steps: int = Field(8, ge=1)
    choice: Literal["auto", "plan"] = "auto"
    controller_max_tokens: int = Field(256, ge=1)

    @model_validator(mode="after")
    def _no_pipeline_switches(self) -> "FCOptions":
        given = [n for n in PIPELINE_ONLY if n in explicit(self)]
        if given:
            raise ValueError(f"{', '.join(given)} would change nothing: iba-fc's controller chooses which tools run "
                             "(use the iba agent for the pipeline's ablations)")
        return self


class SearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=3)
    k: int = Field(3, ge=1, le=10)


class NoArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")  # small models add stray keys to argument-less tools


class FinalTextArgs(BaseModel):
    model_config = ConfigDict(extra="ignore")
    notes: str = ""


class ToolArgError(ValueError):
    """The controller called a tool wrongly: reported back to it, not raised."""


@dataclass
class Outcome:
    content: str
    final: dict[str, Any] | None = None


def tool_specs(task: TaskView) -> list[ToolSpec]:
    empty = {"type": "object", "properties": {}}
    if task.action == "call_api":
        final = ToolSpec(
            name=FINAL,
            description=f"Finish: call the API {task.api_name} with these parameters, chosen to fit the user's preferences.",
            parameters=decoding_schema(task.api_schema) if task.api_schema else empty,
        )
    else:
        final = ToolSpec(
            name=FINAL,
            description="Finish: write the final response following the plan and the user's preferences.",
            parameters={"type": "object", "properties": {"notes": {"type": "string", "description": "optional extra instructions for the writer"}}},
        )
    return [
        ToolSpec(
            name="search_history",
            description="Search the user's past conversations; returns the best-matching passages.",
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "what to look for"}, "k": {"type": "integer", "minimum": 1, "maximum": 10}},
                "required": ["query"],
            },
        ),
        ToolSpec(name="expand_queries", description="Search the history for the five preference facets: style, structure, decisions, corrections, habits.", parameters=empty),
        ToolSpec(name="rerank_evidence", description="Score all passages found so far for preference salience; keep the strong ones.", parameters=empty),
        ToolSpec(name="extract_preferences", description="Extract the user's preferences from the kept evidence (latest value wins).", parameters=empty),
        ToolSpec(name="plan_alignment", description="Plan how the preferences shape this request.", parameters=empty),
        final,
    ]


def _preview(passages) -> str:
    """Each passage's start, for the controller (its context grows every step); a cut one ends in CUT."""
    def start(text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS].rsplit(" ", 1)[0] + " " + CUT
    return "\n".join(f"[{p.chunk_id}] {start(p.text)}" for p in passages) or "(nothing)"


class IBAFunctionCallingAgent(Agent):
    name = "iba-fc"
    options_model = FCOptions
    opts: FCOptions

    async def act(self, task: TaskView, history: list[Turn]) -> Action:
        check_task(task)
        trace = Trace()
        tools = Toolkit(self.env, self.opts, task, history, trace)
        specs = tool_specs(task)
        hint = "its arguments are the API parameters." if task.action == "call_api" else "it writes the final response."
        prompt = render("agent_fc_controller", task=task, final_hint=hint)
        messages: list[dict[str, Any]] = list(prompt.messages)
        used: list[str] = []
        nudge: str | None = None  # tool to force after a reply without a tool call
        limit = self.opts.max_steps
        for step_no in range(1, limit + 2):  # +1: one more forced try after an invalid final call
            if step_no >= limit:
                choice = FINAL
            elif self.opts.choice == "plan":
                choice = next((t for t in PLAN if t not in used), FINAL)
            else:
                choice = nudge or "auto"
            nudge = None
            with trace.step("controller", {"step": step_no, "tool_choice": choice, "messages": len(messages)}) as st:
                # the conversation so far is this call's prompt (on call_api tasks it decides the params)
                st.llm(Prompt(prompt.name, prompt.hash, [{"content": _content(m)} for m in messages]), [])
                comp = await self.env.backend.complete(
                    list(messages), tools=specs, tool_choice=choice, max_tokens=self.opts.controller_max_tokens, seed=self.env.seed
                )
                st.llm(None, [comp])
                st.outputs = {"text": comp.text[:500], "tool_calls": [c.model_dump() for c in comp.tool_calls]}
            if not comp.tool_calls:
                messages.append({"role": "assistant", "content": comp.text})
                messages.append({"role": "user", "content": "Call one of the tools now; call final_output when you are ready."})
                nudge = next((t for t in PLAN if t not in used), FINAL)
                continue
            messages.append(assistant_message(comp))
            for call in comp.tool_calls:
                outcome = await self._run_tool(tools, task, call)
                used.append(call.name)
                messages.append(tool_result_message(call, outcome.content))
                if outcome.final is not None:
                    return make_action(task, outcome.final, trace.steps)
        raise AgentError(f"no valid {FINAL} call within {limit} steps (+1 forced retry)")

    async def _run_tool(self, tools: Toolkit, task: TaskView, call: ToolCall) -> Outcome:
        """Run one tool call; argument errors come back as an error result for the controller."""
        try:
            return await self._dispatch(tools, task, call)
        except ToolArgError as e:
            with tools.trace.step("tool_error", {"tool": call.name, "arguments": call.arguments}) as st:
                st.outputs = str(e)
            return Outcome(content=f"error: {e}")

    async def _dispatch(self, tools: Toolkit, task: TaskView, call: ToolCall) -> Outcome:
        name, args, deep = call.name, call.arguments, tools.deep
        if name == "search_history":
            a = _args(SearchArgs, args, name)
            found = await deep.search(a.query, a.k, label="search")
            return Outcome(_preview(found))
        if name == "expand_queries":
            _args(NoArgs, args, name)
            if not deep.rankings:  # the paper's order: the task itself is searched first
                await deep.search()
            new = await deep.widen()
            return Outcome(json.dumps(deep.queries.model_dump()) + f"\nfound {len({p.chunk_id for p in new})} passages")
        if name == "rerank_evidence":
            _args(NoArgs, args, name)
            kept = await tools.rerank_salience()
            return Outcome(f"kept {len(kept)} passages:\n" + _preview(kept))
        if name == "extract_preferences":
            _args(NoArgs, args, name)
            await self._ensure_evidence(tools)
            prefs = await tools.extract_preferences()  # compacts first when compact=llm
            return Outcome("\n".join(preference_lines(prefs)) or "no preferences found")
        if name == "plan_alignment":
            _args(NoArgs, args, name)
            await self._ensure_evidence(tools)
            slots = tools.o.align == "slots" and task.action == "call_api"
            plan = await (tools.align_slots() if slots else tools.align_plan())
            return Outcome("\n".join(plan.lines()) or "empty plan")
        if name == FINAL:
            if task.action == "call_api":
                try:
                    params = validate_params(task.api_schema or {}, args)
                except ValueError as e:
                    raise ToolArgError(f"{FINAL} arguments do not match the API schema: {e}") from None
                if tools.o.align == "slots":
                    params = tools.enforce_slots(params)
                with tools.trace.step("final_output", {"arguments": args}) as st:
                    st.outputs = {"params": params}
                return Outcome("done", final={"params": params})
            a = _args(FinalTextArgs, args, name)
            await self._ensure_evidence(tools)  # what was searched but not yet reranked still counts
            result = await tools.synthesize("plan", instructions=a.notes)
            return Outcome("done", final=result)
        raise ToolArgError(f"unknown tool {name!r}; the tools are: {', '.join(PLAN)}")

    async def _ensure_evidence(self, tools: Toolkit) -> None:
        if not tools.evidence:
            await tools.rerank_salience()


def _content(message: dict[str, Any]) -> str:
    """A chat message as text: its content, and the arguments of any tool calls it made."""
    calls = message.get("tool_calls") or []
    return "\n".join([str(message.get("content") or ""), *(json.dumps(c, ensure_ascii=False, default=str) for c in calls)])


def _args(model: type[BaseModel], args: dict[str, Any], tool: str) -> Any:
    try:
        return model.model_validate(args)
    except ValidationError as e:
        raise ToolArgError(f"bad arguments for {tool}: {describe_errors(e)}") from None
