"""The fixtures the command tests share with the packages they drive."""

from tests.adapters.conftest import prefeval_dir  # noqa: F401  (the tiny PrefEval folder of `iba import`)
from tests.construct.conftest import demo_dir  # noqa: F401  (a demo build)
from tests.retrieval.conftest import minilm  # noqa: F401  (the packaged MiniLM embedder)
