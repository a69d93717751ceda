import pytest

from iba import prompts, registry


def test_registry_lazy_and_extensible():
    registry.register("agents", "mine", "json:dumps")
    assert registry.resolve("agents", "mine").__name__ == "dumps"
    with pytest.raises(KeyError, match="choose from"):
        registry.resolve("agents", "nope")
    with pytest.raises(ValueError):
        registry.register("agents", "bad", "no_colon")


def test_every_prompt_renders_a_message_and_has_a_hash():
    for name in prompts.names():
        assert len(prompts.template_hash(name)) == 16


def test_missing_prompt_lists_names():
    with pytest.raises(KeyError, match="no prompt template"):
        prompts.render("does-not-exist")
