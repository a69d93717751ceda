from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel

from iba.llm.structured import StructuredOutputError, complete_json, parse_reply
from tests.fakes import ScriptedBackend


class Order(BaseModel):
    dish: str
    spice: Literal["mild", "medium", "hot"]


def test_parse_reply_tolerates_fences_and_prose():
    assert parse_reply('{"dish": "pho", "spice": "mild"}', Order).dish == "pho"
    assert parse_reply('```json\n{"dish": "pho", "spice": "hot"}\n```', Order).spice == "hot"
    assert parse_reply('Sure! Here it is: {"dish": "a {b}", "spice": "medium"} hope that helps', Order).dish == "a {b}"
    with pytest.raises(ValueError, match="spice"):
        parse_reply('{"dish": "pho", "spice": "volcanic"}', Order)
    with pytest.raises(ValueError, match="no JSON object"):
        parse_reply("I cannot do that", Order)


async def test_valid_first_reply_sends_the_schema():
    be = ScriptedBackend([{"dish": "pho", "spice": "mild"}])
    obj, comps = await complete_json(be, [{"role": "user", "content": "order"}], Order, max_tokens=64, seed=5)
    assert obj == Order(dish="pho", spice="mild") and len(comps) == 1
    kwargs = be.calls[0][1]
    assert kwargs["json_schema"] == Order.model_json_schema() and kwargs["seed"] == 5 and kwargs["max_tokens"] == 64


async def test_invalid_reply_is_retried_once_with_the_error_quoted():
    be = ScriptedBackend(['{"dish": "pho", "spice": "volcanic"}', '{"dish": "pho", "spice": "hot"}'])
    obj, comps = await complete_json(be, [{"role": "user", "content": "order"}], Order)
    assert obj.spice == "hot" and len(comps) == 2
    retry_msgs = be.calls[1][0]
    assert retry_msgs[-2] == {"role": "assistant", "content": '{"dish": "pho", "spice": "volcanic"}'}
    assert retry_msgs[-1]["role"] == "user" and "spice" in retry_msgs[-1]["content"]
    assert len(be.calls[0][0]) == 1  # the caller's list was not mutated


async def test_gives_up_with_raw_text_and_all_completions():
    be = ScriptedBackend(["nope", "still nope", "unused"])
    with pytest.raises(StructuredOutputError) as ei:
        await complete_json(be, [{"role": "user", "content": "order"}], Order)
    err = ei.value
    assert err.raw == "still nope" and len(err.completions) == 2 and "Order" in str(err)
    assert sum(c.usage().llm_calls for c in err.completions) == 2
