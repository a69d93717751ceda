import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
import urllib.request
from pathlib import Path

import pytest

from iba.agents import sandbox as bwrap
from iba.agents.base import AgentError
from iba.agents.external import ExternalAgent, child_argv, child_env
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
    cmd = _script(tmp_path, "import json,sys; d=json.load(sys.stdin); "
                            "print(json.dumps({'kind':'generate','text':json.dumps(d),'trace':[{'step':'mine','llm_calls':2}]}))")
    action = await _agent(tmp_path, cmd=cmd).act(TEXT_TASK, small_history())
    seen = json.loads(action.text)
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


# ---------------------------------------------------------------- what the command can see

SEEN = """
import json, os, sys
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink("/proc/self/fd/" + fd)
    except OSError:
        pass
json.load(sys.stdin)
seen = {"argv": sys.argv, "cwd": os.getcwd(), "files": os.listdir("."), "env": dict(os.environ), "fds": fds}
print(json.dumps({"kind": "generate", "text": json.dumps(seen)}))
"""


@pytest.fixture
def dataset_dir(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "answer_key.jsonl").write_text('{"instance_id": "x"}\n')
    return ds


async def _seen(tmp_path, monkeypatch, ds, **opts) -> dict:
    (tmp_path / "spy.py").write_text(SEEN)
    monkeypatch.chdir(ds)  # IBA started from the dataset directory: the worst case
    action = await _agent(tmp_path, cmd="python ../spy.py", **opts).act(TEXT_TASK, small_history())
    return json.loads(action.text)


async def test_unsandboxed_command_gets_no_secrets_and_no_way_to_the_dataset(tmp_path, monkeypatch, dataset_dir):
    """sandbox=none (or no bwrap): the older accident prevention, still applied."""
    for name, value in {"OPENAI_API_KEY": "sk-iba-test-SECRET-123", "HF_TOKEN": "hf_SECRET", "GITHUB_TOKEN": "ghp_SECRET",
                        "DATABASE_URL": "postgres://me:SECRET@db/x", "IBA_DATASET": str(dataset_dir),
                        "OLDPWD": str(dataset_dir), "KEEP_ME": "1", "TOKENIZERS_PARALLELISM": "false"}.items():
        monkeypatch.setenv(name, value)
    # an inheritable descriptor on the answer key, as a careless parent might hold
    fd = os.open(dataset_dir / "answer_key.jsonl", os.O_RDONLY)
    os.set_inheritable(fd, True)
    try:
        seen = await _seen(tmp_path, monkeypatch, dataset_dir, sandbox="none")
    finally:
        os.close(fd)
    env = seen["env"]
    assert not {"OPENAI_API_KEY", "HF_TOKEN", "GITHUB_TOKEN", "DATABASE_URL", "IBA_DATASET", "OLDPWD"} & set(env)
    assert env["KEEP_ME"] == "1" and env["TOKENIZERS_PARALLELISM"] == "false" and env["PATH"] == os.environ["PATH"]
    assert "SECRET" not in json.dumps(seen)
    assert str(dataset_dir) not in json.dumps(seen)  # not in argv, env, cwd or any open descriptor
    assert seen["argv"][0] == str(tmp_path / "spy.py")  # the relative path was resolved before leaving IBA's cwd
    assert seen["files"] == [] and env["PWD"] == seen["cwd"] and seen["cwd"] != str(dataset_dir)
    assert not os.path.exists(seen["cwd"])  # the private directory went with the process
    assert set(seen["fds"]) <= {"0", "1", "2", "3"}  # stdio and the listing's own descriptor


async def test_pass_env_lets_named_variables_through(tmp_path, monkeypatch, dataset_dir):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-passed")
    monkeypatch.setenv("HF_TOKEN", "hf_kept_back")
    seen = await _seen(tmp_path, monkeypatch, dataset_dir, pass_env="OPENAI_API_KEY")
    assert seen["env"]["OPENAI_API_KEY"] == "sk-passed" and "HF_TOKEN" not in seen["env"]


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "API_KEY", "HF_TOKEN", "GITHUB_TOKEN",
                                  "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "PGPASSWORD",
                                  "SSH_AUTH_SOCK", "GOOGLE_APPLICATION_CREDENTIALS", "openai_api_key"])
def test_secret_looking_names_are_dropped(name):
    assert name not in child_env({name: "x", "HOME": "/home/u"}, cwd="/tmp/w")


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "TOKENIZERS_PARALLELISM", "CUDA_VISIBLE_DEVICES",
                                  "OPENAI_BASE_URL", "KEYBOARD_LAYOUT"])
def test_ordinary_names_are_kept(name):
    assert child_env({name: "x"}, cwd="/tmp/w")[name] == "x"


def test_argv_resolves_existing_relative_paths_only(tmp_path):
    (tmp_path / "agent.py").write_text("")
    argv = child_argv("python agent.py --mode fast ./missing.txt", str(tmp_path))
    assert argv == [sys.executable, str(tmp_path / "agent.py"), "--mode", "fast", "./missing.txt"]


async def test_private_directory_is_removed_after_a_timeout(tmp_path, monkeypatch):
    import tempfile

    made = []
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda **kw: made.append(real(**kw)) or made[-1])
    with pytest.raises(AgentError, match="timed out"):
        await _agent(tmp_path, cmd=_script(tmp_path, "import time; time.sleep(30)"), timeout="1").act(TEXT_TASK, [])
    assert made and not os.path.exists(made[0])


# ---------------------------------------------------------------- process groups

# The agent starts a child that would outlive it (its grandchild, as iba sees it), holding the
# agent's stdout open; a marker in its command line lets the test find it in the host's /proc.
GRANDPARENT = """
import json, subprocess, sys, time
json.load(sys.stdin)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", sys.argv[1]])
if sys.argv[2] == "exit":
    print(json.dumps({"kind": "generate", "text": "done"}), flush=True)
else:
    time.sleep(120)
"""

SANDBOXES = ["none", pytest.param("bwrap", marks=pytest.mark.skipif(
    bwrap.unavailable() is not None, reason=f"no sandbox here: {bwrap.unavailable()}"))]


def _alive(marker: str) -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(pid)
        except OSError:
            pass
    return out


def _gone(marker: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _marker(request) -> str:
    return f"iba-grandchild-{os.getpid()}-{abs(hash(request.node.nodeid))}"


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_an_exit_kills_the_group_and_does_not_wait_for_it(tmp_path, sandbox, request):
    marker = _marker(request)
    agent = _agent(tmp_path, cmd=_script(tmp_path, GRANDPARENT) + f" {marker} exit", sandbox=sandbox)
    try:
        # before the fix: communicate() waited for the grandchild to close stdout (2 minutes)
        action = await asyncio.wait_for(agent.act(TEXT_TASK, []), 30)
        assert action.text == "done"
        assert _gone(marker)
    finally:
        for pid in _alive(marker):
            os.kill(int(pid), 9)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_timeout_kills_the_group(tmp_path, sandbox, request):
    marker = _marker(request)
    agent = _agent(tmp_path, cmd=_script(tmp_path, GRANDPARENT) + f" {marker} sleep", sandbox=sandbox, timeout="1")
    try:
        t0 = time.monotonic()
        with pytest.raises(AgentError, match="timed out after 1s"):
            await asyncio.wait_for(agent.act(TEXT_TASK, []), 30)
        assert time.monotonic() - t0 < 15
        assert _gone(marker)
    finally:
        for pid in _alive(marker):
            os.kill(int(pid), 9)


@pytest.mark.parametrize("sandbox", SANDBOXES)
async def test_a_cancelled_action_kills_the_group(tmp_path, sandbox, request):
    """`iba run --timeout` (the runner's per-action timeout) cancels act(): nothing may keep running."""
    marker = _marker(request)
    agent = _agent(tmp_path, cmd=_script(tmp_path, GRANDPARENT) + f" {marker} sleep", sandbox=sandbox)
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(2):
                await agent.act(TEXT_TASK, [])
        assert _gone(marker)
    finally:
        for pid in _alive(marker):
            os.kill(int(pid), 9)


async def test_the_runner_timeout_leaves_no_process(tmp_path, request):
    from iba.run.runner import RunConfig, run_one

    marker = _marker(request)
    agent = _agent(tmp_path, cmd=_script(tmp_path, GRANDPARENT) + f" {marker} sleep")
    try:
        rec = await run_one(agent, "external", TEXT_TASK, [], dataset="d", model="m", trial=0,
                            cfg=RunConfig(agents=["external"], timeout_s=2))
        assert rec.status == "errored" and "longer than 2s" in rec.error
        assert _gone(marker)
    finally:
        for pid in _alive(marker):
            os.kill(int(pid), 9)


# ---------------------------------------------------------------- reply cap

BIG = "import json,sys; json.load(sys.stdin); sys.stdout.write(json.dumps({'kind':'generate','text':'x'*int(sys.argv[1])}))"


async def test_a_reply_over_the_cap_fails_the_record(tmp_path):
    from iba.run.runner import RunConfig, run_one

    cmd = _script(tmp_path, BIG)
    with pytest.raises(AgentError, match=r"more than 1 MB \(max_reply_mb=1\)"):
        await _agent(tmp_path, cmd=f"{cmd} 1500000", max_reply_mb="1").act(TEXT_TASK, [])
    # the default cap (4 MB) stops the 60 MB reply; the record is failed with the reason
    rec = await run_one(_agent(tmp_path, cmd=f"{cmd} 60000000"), "external", TEXT_TASK, [], dataset="d", model="m",
                        trial=0, cfg=RunConfig(agents=["external"]))
    assert rec.status == "failed" and rec.action is None and "max_reply_mb=4" in rec.error
    # under the cap: kept whole
    action = await _agent(tmp_path, cmd=f"{cmd} 1500000", max_reply_mb="2").act(TEXT_TASK, [])
    assert len(action.text) == 1_500_000


@pytest.fixture
def big_server():
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"kind": "generate", "text": "y" * 3_000_000}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *a):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/act"
    server.shutdown()


async def test_an_http_reply_over_the_cap_fails(tmp_path, big_server):
    with pytest.raises(AgentError, match=r"more than 1 MB"):
        await _agent(tmp_path, url=big_server, max_reply_mb="1").act(TEXT_TASK, [])
    assert len((await _agent(tmp_path, url=big_server).act(TEXT_TASK, [])).text) == 3_000_000


def test_options_are_checked(tmp_path):
    for opts, match in [({"cmd": "x", "max_reply_mb": "0"}, "max_reply_mb=0: must be > 0"),
                        ({"cmd": "x", "timeout": "inf"}, "timeout=inf: must be a finite number"),
                        ({"cmd": "x", "sandbox": "docker"}, "option sandbox=docker"),
                        ({"url": "http://x", "network": "true"}, "apply to cmd= agents"),
                        ({"cmd": "x", "ro": str(tmp_path / "missing")}, "does not exist")]:
        if "ro" in opts and bwrap.unavailable():
            continue  # ro= paths are checked when the sandbox is set up
        with pytest.raises(ValueError, match=match):
            _agent(tmp_path, **opts)
