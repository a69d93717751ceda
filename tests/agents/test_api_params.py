import pytest

from iba.agents.api_params import params_model, validate_params
from tests.agents.helpers import API_SCHEMA


def test_valid_params_pass_and_optional_unset_are_dropped():
    schema = dict(API_SCHEMA, properties=dict(API_SCHEMA["properties"], note={"type": "string"}))
    assert validate_params(schema, {"cuisine": "italian", "spice_level": "mild", "servings": 3}) == {
        "cuisine": "italian", "spice_level": "mild", "servings": 3}


@pytest.mark.parametrize(
    "params, problem",
    [
        ({"cuisine": "thai", "spice_level": "mild", "servings": 3}, "cuisine"),
        ({"cuisine": "italian", "spice_level": "mild", "servings": "3"}, "servings"),
        ({"cuisine": "italian", "spice_level": "mild", "servings": 11}, "servings"),
        ({"cuisine": "italian", "spice_level": "mild"}, "servings: Field required"),
        ({"cuisine": "italian", "spice_level": "mild", "servings": 3, "tip": 5}, "tip"),
        (["not", "an", "object"], "JSON object"),
    ],
)
def test_invalid_params_explain_why(params, problem):
    with pytest.raises(ValueError, match=problem):
        validate_params(API_SCHEMA, params)


def test_model_schema_keeps_enums_for_constrained_decoding():
    schema = params_model(API_SCHEMA).model_json_schema()
    assert schema["properties"]["cuisine"]["enum"] == ["sichuan", "japanese", "italian"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"cuisine", "spice_level", "servings"}


def test_unbounded_or_wide_integers_keep_bounds():
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 5000}}, "required": ["n"]}
    assert validate_params(schema, {"n": 4000}) == {"n": 4000}
    with pytest.raises(ValueError, match="less than or equal to 5000"):
        validate_params(schema, {"n": 5001})
