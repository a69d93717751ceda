"""IBA: implicit behavioral alignment of personalized LLM agents (IBA-Bench + IBA-Agent)."""

__version__ = "0.1.0"
