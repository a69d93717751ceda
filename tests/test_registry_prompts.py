import pytest

from iba import prompts, registry


def test_registry_lazy_and_extensible():
    registry.register("agents", "mine", "json:dumps")
    assert registry.resolve("agents", "mine").__name__ == "dumps"
    with pytest.raises(KeyError, match="choose from"):
        registry.resolve("agents", "nope")
    with pytest.raises(ValueError):
        registry.register("agents", "bad", "no_colon")


def test_snapshot_restores_in_a_fresh_registry(monkeypatch):
    registry.register("embedders", "mine", "json:loads")
    table = registry.snapshot()
    assert table["embedders"]["mine"] == "json:loads" and table["agents"]["rag"] == "iba.agents.rag:RagAgent"
    monkeypatch.setattr(registry, "_REGISTRY", {})  # what a spawned worker starts from, in effect
    registry.restore(table)
    assert registry.resolve("embedders", "mine").__name__ == "loads"
    table["agents"]["extra"] = "json:dumps"  # a copy: editing it leaves the registry alone
    assert "extra" not in registry.snapshot()["agents"]


def test_every_prompt_renders_a_message_and_has_a_hash():
    for name in prompts.names():
        assert len(prompts.template_hash(name)) == 16


def test_missing_prompt_lists_names():
    with pytest.raises(KeyError, match="no prompt template"):
        prompts.render("does-not-exist")
