import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
import urllib.request
from pathlib import Path

import pytest

from iba.agents.base import AgentError
from iba.agents.external import ExternalAgent
from tests.agents.helpers import API_TASK, TEXT_TASK, env, small_history
from tests.fakes import ScriptedBackend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "external_agent.py"


def _agent(tmp_path, **opts):
    return ExternalAgent(env(ScriptedBackend([]), tmp_path), **opts)


def _script(tmp_path, body: str) -> str:
    p = tmp_path / "agent.py"
    p.write_text(body)
    return f"python {p}"


async def test_subprocess_example_agent_generate_and_call_api(tmp_path):
    agent = _agent(tmp_path, cmd=f"python {EXAMPLE}")
    action = await agent.act(TEXT_TASK, small_history())
    assert action.kind == "generate" and TEXT_TASK.query in action.text
    assert action.trace[0].step == "external" and action.trace[0].inputs["history_turns"] == len(small_history())
    api = await agent.act(API_TASK, small_history())
    # the example picks the enum value the user mentioned most recently ("japanese" in the history)
    assert api.kind == "call_api" and api.api_name == "order_food" and api.params["cuisine"] == "japanese"


async def test_request_is_task_plus_history_only(tmp_path):
    out = tmp_path / "seen.json"
    cmd = _script(tmp_path, f"import json,sys; d=json.load(sys.stdin); open({str(out)!r},'w').write(json.dumps(d)); "
                            "print(json.dumps({'kind':'generate','text':'hi','trace':[{'step':'mine','llm_calls':2}]}))")
    action = await _agent(tmp_path, cmd=cmd).act(TEXT_TASK, small_history())
    seen = json.loads(out.read_text())
    assert set(seen) == {"task", "history"} and seen["task"] == TEXT_TASK.model_dump(mode="json")
    assert [s.step for s in action.trace] == ["external", "mine"] and action.trace[1].llm_calls == 2


@pytest.mark.parametrize(
    "body, match",
    [
        ("import sys; sys.stderr.write('boom: model crashed'); sys.exit(3)", "exited with 3; stderr: boom: model crashed"),
        ("print('this is not json')", "did not reply with a valid Action JSON"),
        ("print('{\"kind\": \"call_api\", \"params\": {}}')", "replied with a call_api action to a generate task"),
        ("import time; time.sleep(30)", "timed out after 1s"),
    ],
)
async def test_subprocess_failures_are_errors(tmp_path, body, match):
    with pytest.raises(AgentError, match=match):
        await _agent(tmp_path, cmd=_script(tmp_path, body), timeout="1").act(TEXT_TASK, small_history())


async def test_invalid_params_are_errors(tmp_path):
    body = "print('{\"kind\": \"call_api\", \"params\": {\"cuisine\": \"thai\", \"spice_level\": \"none\", \"servings\": 1}}')"
    with pytest.raises(AgentError, match="do not match the API schema.*cuisine"):
        await _agent(tmp_path, cmd=_script(tmp_path, body)).act(API_TASK, small_history())


def test_needs_exactly_one_of_cmd_or_url(tmp_path):
    with pytest.raises(ValueError, match="exactly one of cmd"):
        _agent(tmp_path)
    with pytest.raises(ValueError, match="exactly one of cmd"):
        _agent(tmp_path, cmd="x", url="http://y")


@pytest.fixture
def example_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--serve", str(port)])
    url = f"http://127.0.0.1:{port}/act"
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=1)
        except urllib.error.HTTPError:
            break  # up: a 400 for the empty request
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("example agent server did not start")
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


async def test_http_example_agent(tmp_path, example_server):
    agent = _agent(tmp_path, url=example_server)
    action = await agent.act(API_TASK, small_history())
    assert action.kind == "call_api" and action.params["spice_level"] in ("none", "mild", "hot")
    assert action.trace[0].inputs["url"] == example_server


@pytest.fixture
def failing_server():
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"Traceback: agent exploded"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/act"
    server.shutdown()


async def test_http_errors_carry_the_body(tmp_path, failing_server):
    with pytest.raises(AgentError, match="HTTP 500: Traceback: agent exploded"):
        await _agent(tmp_path, url=failing_server).act(TEXT_TASK, small_history())
    with pytest.raises(AgentError, match="unreachable"):
        await _agent(tmp_path, url="http://127.0.0.1:9/act", timeout="2").act(TEXT_TASK, [])
