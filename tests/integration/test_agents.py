# SPDX-License-Identifier: Apache-2.0
"""Real coding agents end to end (issue 26, item 5; docs/testing.md "Real
coding agents"): Claude Code and Codex CLI, from their npm packages at the
versions tests/images/build.sh pins, run in a Domain against a scripted
fake of their model provider's API (tests/integration/agent_provider.py).

The provider runs on a test host of the test network namespace (netlab.py,
AGENT_API port 80, plain HTTP); the Domain's only resolver is a test
nameserver (AGENT_DNS) that answers API_NAME and DENIED_NAME with that
address, and the profile allows API_NAME only (allow_hosts, strict DNS).
The agent works on a Git workspace with a failing unit test. The script
makes it, step by step: read the file, run the tests (they fail), edit the
file, run the tests and commit, plant host-side Git traps (fsmonitor, a hook,
an alias), ask for three host commands with lazaret-escalate (one an
auto_approve rule runs, one the test approves by typing y in the agent's
terminal, one the test denies), and fetch from DENIED_NAME. Then the host
checks: the fix and the commit are in the developer's repository, `git
status` is clean and ran nothing planted, each host command ran exactly as
approved and the denied one not at all, the denial of the name is in
`lazaret log --denied`, and the provider's log shows every step's tool
result (what the agent saw: the failing test, the edit, the exit statuses).

Controls: the traps the agent tried to plant run when planted on the host
in a clone (so the check could see them); the denied name resolves and is
served from the host's side (so the refusal is the Domain's rule); the test
fails before the edit (the commit is the agent's fix).
"""

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pexpect
import pytest

import netlab as N
from conftest import RUN_TIMEOUT, profiles_toml
from test_escalation import DENIED, QUESTION, Host, answer
from test_git import git, host_git_problem, new_repo, out, planted
from test_term_screen import COLS, PROMPT_GRACE, ROWS, Pane
from test_terminal import terms  # noqa: F401 (a fixture)

API_NAME = "api.agents.test"
DENIED_NAME = "denied.agents.test"
PROVIDER = Path(__file__).parent / "agent_provider.py"
AGENT_TIMEOUT = 120       # one agent's whole scripted run
DONE = "LZ-AGENT-DONE"     # the script's final answer, printed by the agent

CALC_BROKEN = "def add(a, b):\n    return a - b\n"
CALC_FIXED = "def add(a, b):\n    return a + b\n"
TEST_CALC = ("import unittest\nfrom calc import add\n\n\n"
             "class AddTest(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n"
             "if __name__ == '__main__':\n    unittest.main()\n")
COMMIT_MESSAGE = "Fix add"
GIT_ID = "-c user.name=Agent -c user.email=agent@lazaret.invalid"


def agent_image(test_images, name) -> str:
    return f"oci:{test_images.cache}/agents-{name}:latest"


# ---- the test host: resolver and provider ---------------------------------------

@pytest.fixture(scope="module")
def agent_net(_root):
    net = N.TestNet.create()
    try:
        dns = net.serve([("dns", N.AGENT_DNS, 53, {API_NAME: N.AGENT_API,
                                                   DENIED_NAME: N.AGENT_API})])
        assert N.dns_query(N.AGENT_DNS, 53, API_NAME) == N.AGENT_API
        assert N.dns_query(N.AGENT_DNS, 53, DENIED_NAME) == N.AGENT_API
        yield net, dns
    finally:
        net.close()


class Provider:
    """agent_provider.py on AGENT_API:80 with one test's script."""

    def __init__(self, net, script: dict):
        self.log = net.dir / f"provider-{len(net.servers)}.log"
        self.log.touch()
        cfg = {"addr": N.AGENT_API, "port": 80, "log": str(self.log), "script": script}
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", N.NS, "/usr/bin/python3", str(PROVIDER), json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("READY"), f"fake provider: {line!r} {self.proc.stderr.read()}"
        self.server = N.Server(self.proc, self.log, [])
        net.servers.append(self.server)

    def records(self) -> list:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def results(self, api, script=None) -> dict:
        """{step: the tool result the request of that step carried}: what
        the agent reported back after running step - 1 (script: of the
        conversation that script's word picked)."""
        return {r["step"]: r["result"] for r in self.records()
                if r.get("api") == api and r.get("conversation") and r.get("step")
                and r.get("script") == script}


@pytest.fixture
def provider(terms, agent_net):
    """provider(script) -> Provider; stopped before rig's teardown check (its
    command line names the test's directory)."""
    made = []

    def start(script):
        made.append(Provider(agent_net[0], script))
        return made[-1]
    yield start
    for p in made:
        p.server.stop()
        print(f"---- {p.log.name} ----\n" + "\n".join(
            json.dumps({k: v for k, v in r.items() if k != "tools"}) for r in p.records()))


def control_denied_name_is_served(net):
    """From the host (outside every Domain), DENIED_NAME's address serves
    the provider: a refusal in the Domain is its rule, not a dead host."""
    import urllib.request
    req = urllib.request.Request(f"http://{N.AGENT_API}/v1/models",
                                 headers={"Host": DENIED_NAME})
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


# ---- the workspace, the host commands, the script -------------------------------

def workspace(lz) -> Path:
    ws = new_repo(lz, "ws", {"calc.py": CALC_BROKEN, "test_calc.py": TEST_CALC,
                             ".gitignore": "__pycache__/\n"})
    # Control: the test fails before the agent's edit.
    p = lz.run_as_user(["python3", "-B", "-m", "unittest", "-q", "test_calc"], cwd=ws)
    assert p.returncode != 0 and "AssertionError" in p.stderr, p.stderr
    return ws


def traps(lz) -> tuple:
    """Markers and the shell lines that plant a command for the host's Git
    three ways (core.fsmonitor, a pre-commit hook, an alias of status)."""
    d = lz.mkdir("trap-marks")  # the user's: the host's Git runs as the user
    marks = {k: d / f"planted-{k}" for k in ("fsmonitor", "hook", "alias")}
    cmd = (f"git config core.fsmonitor \"{planted(marks['fsmonitor'])}\"; echo fsmonitor=$?; "
           f"printf '#!/bin/sh\\ntouch {marks['hook']}\\n' > .git/hooks/pre-commit && "
           "chmod +x .git/hooks/pre-commit; echo hook=$?; "
           f"git config alias.st '!touch {marks['alias']}'; echo alias=$?")
    return marks, cmd


def control_traps_run_when_planted_on_the_host(lz, ws, marks, cmd):
    """The same trap lines, run by the developer in a clone: the host's Git
    runs each (git status, commit, the alias), so the check could see them."""
    clone = lz.home / "control-clone"
    subprocess.run(["git", "clone", "-q", str(ws), str(clone)], check=True, capture_output=True,
                   user=lz.user.uid, group=lz.user.gid)
    lz.run_as_user(["sh", "-c", cmd], cwd=clone)
    git(lz, clone, "status", check=False)
    git(lz, clone, "commit", "-q", "--allow-empty", "-m", "probe", check=False)
    git(lz, clone, "st", check=False)
    ran = {k: m.exists() for k, m in marks.items()}
    for m in marks.values():
        m.unlink(missing_ok=True)
    assert ran == {k: True for k in marks}, f"control: planted on the host, ran {ran}"


class Escalations:
    """The host command the agent asks for, and what the three requests
    are: AUTO matches the profile's auto_approve rule; APPROVE and DENY are
    put to the developer (special characters reach the host literally)."""

    AUTO = ["auto", "two words"]
    APPROVE = ["approve", "x;y", "$(id)"]
    DENY = ["deny"]

    def __init__(self, lz):
        self.host = Host(lz)
        self.tool = self.host.script("tool", "echo host-ran-$1")

    def rule(self):
        return {"executable": str(self.tool), "args": self.AUTO}

    def command(self, args, why):
        q = " ".join("'" + a.replace("'", "'\\''") + "'" for a in args)
        return f"lazaret-escalate --why '{why}' -- {self.tool} {q}; echo escalate=$?"

    def check(self, ws):
        runs = self.host.ran("tool")
        want = [(str(ws.resolve()), "".join(f"[{a}]" for a in args))
                for args in (self.AUTO, self.APPROVE)]
        assert runs == want, f"host commands run: {runs}, expected {want}"


def agent_steps(lz, esc: Escalations, trap_cmd: str) -> list:
    """The shell commands of the script, in order (the Anthropic script
    puts a Read before them and an Edit in place of the edit command)."""
    return [
        {"command": "python3 -m unittest -q test_calc 2>&1; echo unittest=$?"},
        None,  # the edit: per agent
        {"command": f"python3 -m unittest -q test_calc 2>&1 && git add calc.py && "
                    f"git {GIT_ID} commit -q -m '{COMMIT_MESSAGE}' && git log --format=%s -1; "
                    "echo commit=$?"},
        {"command": trap_cmd},
        {"command": esc.command(esc.AUTO, "the rule allows it")},
        {"command": esc.command(esc.APPROVE, "please approve")},
        {"command": esc.command(esc.DENY, "please deny")},
        {"command": f"curl -sS -m 10 http://{DENIED_NAME}/v1/models 2>&1; echo curl=$?"},
        {"text": f"All steps done. {DONE}"},
    ]


def check_results(results: dict, offset: int):
    """The tool results the provider received: the result of
    agent_steps()[i] came with the request of step i + offset."""
    r = [results.get(offset + i, "") or "" for i in range(8)]
    want = [
        (0, "unittest=1"), (0, "AssertionError"),
        (2, "commit=0"), (2, COMMIT_MESSAGE),
        (3, "fsmonitor=[1-9]"), (3, "hook=[1-9]"), (3, "alias=[1-9]"),  # all refused
        (4, "host-ran-auto"), (4, "escalate=0"),
        (5, "host-ran-approve"), (5, "escalate=0"),
        (6, f"escalate={DENIED}"),
        (7, "curl=6"),   # could not resolve: strict DNS answers nothing for it
    ]
    missing = [(i, s) for i, s in want if not re.search(s, r[i])]
    assert not missing, ("tool results without what each step should show: "
                         f"{missing}\n" + json.dumps(results, indent=1))


def answer_prompts(t):
    """The developer at the agent's terminal: y to the first request that
    asks, n to the second."""
    t.expect(QUESTION, timeout=AGENT_TIMEOUT, what="the prompt of the request to approve")
    assert "'approve'" in t.text[t.text.rindex("Host escalation request"):]
    answer(t, "y\r")
    t.expect(QUESTION, timeout=AGENT_TIMEOUT, what="the prompt of the request to deny")
    assert "'deny'" in t.text[t.text.rindex("Host escalation request"):]
    answer(t, "n\r")


def host_checks(rig, ws, esc, marks, net):
    lz = rig.lz
    assert (ws / "calc.py").read_text() == CALC_FIXED
    assert out(lz, ws, "log", "--format=%s", "-1") == COMMIT_MESSAGE + "\n"
    assert out(lz, ws, "show", "--format=", "--name-only", "HEAD") == "calc.py\n"
    assert out(lz, ws, "status", "--porcelain") == ""
    problem = host_git_problem(lz, [ws], marks["fsmonitor"])
    assert problem is None, problem
    git(lz, ws, "st", check=False)
    assert not any(m.exists() for m in marks.values()), \
        {k: m.exists() for k, m in marks.items()}
    esc.check(ws)
    d = lz.run(["log", "--workspace", ws, "--denied"])
    assert d.returncode == 0 and DENIED_NAME in d.stdout, d.stdout + d.stderr
    assert API_NAME not in d.stdout, d.stdout
    control_denied_name_is_served(net)
    control_traps_run_when_planted_on_the_host(lz, ws, marks, traps(lz)[1])


def config(rig, test_images, name, environment, secrets, esc):
    """A v2 profile NAME on the agent's image: API_NAME allowed, the test
    resolver upstream, plain environment values and the API key as an env
    reference (its value given to lazaret), the auto_approve rule."""
    profile = {"image": agent_image(test_images, name), "allow_hosts": [API_NAME],
               "env": {k: f"env:{k}" for k in secrets},
               "escalation": {"enabled": True, "auto_approve": [esc.rule()]}}
    if environment:
        profile["environment"] = environment
    text = profiles_toml({name: profile}, network={"resolvers": [N.AGENT_DNS]})
    text = text.replace('"lazaret-trusted-host-config-v1"', '"lazaret-trusted-host-config-v2"')
    rig.lz.write(rig.lz.config_path, text)


# ---- Claude Code ----------------------------------------------------------------

CLAUDE_SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-lazaret-test-0000000000000000"}
CLAUDE_ENV = {
    "ANTHROPIC_BASE_URL": f"http://{API_NAME}",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "IS_SANDBOX": "1",  # root in the image: --dangerously-skip-permissions needs it
}


def test_claude_code(terms, agent_net, provider, test_images):
    net, _ = agent_net
    rig, lz = terms.rig, terms.lz
    ws = workspace(lz)
    esc = Escalations(lz)
    marks, trap_cmd = traps(lz)
    steps = agent_steps(lz, esc, trap_cmd)
    steps[1] = {"tool": "Edit", "input": {"file_path": "/workspace/calc.py",
                                          "old_string": "return a - b",
                                          "new_string": "return a + b"}}
    script = [{"tool": "Read", "input": {"file_path": "/workspace/calc.py"}}] + steps
    provider = provider({"anthropic": {"Fix": script, "TUI": TUI_SCRIPT(esc)}, "openai": []})
    config(rig, test_images, "claude", CLAUDE_ENV, CLAUDE_SECRETS, esc)
    t = terms.shell("claude", ["claude", "-p", "Fix the failing test in this repository.",
                               "--dangerously-skip-permissions", "--model", "claude-lz-test"],
                    env=CLAUDE_SECRETS)
    answer_prompts(t)
    t.expect(DONE, timeout=AGENT_TIMEOUT, what="the agent's final answer")
    t.child.expect(pexpect.EOF, timeout=RUN_TIMEOUT)
    t.child.close()
    assert t.child.exitstatus == 0, t.text[-3000:]
    terms.check_report(t, t.child.exitstatus)
    results = provider.results("anthropic", "Fix")
    assert "return a - b" in results.get(1, ""), results.get(1)  # the Read
    assert results.get(3) is not None, "no result of the Edit step"
    assert not any(r.get("unknown") for r in provider.records()), provider.records()
    check_results(results, offset=2)
    host_checks(rig, ws, esc, marks, net)
    claude_tui(lz, ws, esc, provider)


# ---- Claude Code's TUI, in tmux -------------------------------------------------

TUI_DONE = "LZ-TUI-DONE"
TUI_ASK = ["tui", "asked in the TUI"]


def TUI_SCRIPT(esc):
    return [{"command": esc.command(TUI_ASK, "from the TUI")}, {"text": f"Done: {TUI_DONE}"}]


# Claude Code's first-run questions answered ahead (its state file): the
# onboarding, the custom API key (approved by its last 20 characters), the
# workspace's trust dialog, the bypass-permissions warning.
CLAUDE_STATE = {
    "hasCompletedOnboarding": True, "theme": "dark", "bypassPermissionsModeAccepted": True,
    "customApiKeyResponses": {"approved": [CLAUDE_SECRETS["ANTHROPIC_API_KEY"][-20:]],
                              "rejected": []},
    "projects": {"/workspace": {"hasTrustDialogAccepted": True,
                                "hasCompletedProjectOnboarding": True}},
}


class AgentPane(Pane):
    """test_term_screen's Pane with the agent's environment. The pane runs
    `lazaret ARGS` under sh, which prints LZ-EXIT=STATUS after it and stays:
    what Lazaret left on the terminal is what the next program gets (no
    "Pane is dead" line of tmux's own drawn over it)."""

    def __init__(self, lz, argv, env, rows=ROWS, cols=COLS):
        self.sock = str(lz.path("tmux.sock"))
        e = lz.env({"TERM": "xterm-256color", **env})
        u = lz.user
        cmd = ["setpriv", f"--reuid={u.uid}", f"--regid={u.gid}", "--init-groups", "env", "-i",
               *(f"{k}={v}" for k, v in e.items()), "/bin/sh", "-c",
               '"$@"; echo "LZ-EXIT=$?"; exec sleep 600', "sh", str(lz.bin), *map(str, argv)]
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", str(cols), "-y", str(rows),
                  "-c", str(lz.home), shlex.join(cmd))  # tmux gives it to sh -c

    def text(self) -> str:
        return self.tmux("capture-pane", "-p")

    def has(self, s) -> bool:
        return s in self.text()


def claude_tui(lz, ws, esc, provider):
    """Claude Code interactive in a tmux pane: it renders, survives a
    resize, a prompt (the screen after the answer is Claude Code's again),
    Ctrl-C, and `lazaret stop` from another terminal leaves the pane
    restored (normal screen, cursor visible)."""
    seed = (f"mkdir -p ~/.claude && cat > ~/.claude.json <<'LZEOF'\n"
            f"{json.dumps(CLAUDE_STATE)}\nLZEOF\n")
    pane = AgentPane(lz, ["run", "claude", "--workspace", ws, "--", "bash", "-c",
                          seed + "exec claude --dangerously-skip-permissions "
                          "--model claude-lz-test"], CLAUDE_SECRETS)
    try:
        _drive_tui(lz, ws, esc, provider, pane)
    finally:
        print("---- the pane at the end ----\n" + pane.text())
        pane.close()


def _drive_tui(lz, ws, esc, provider, pane):
    pane.wait(lambda: pane.has("Claude Code") and pane.has("bypass permissions"),
              "Claude Code's banner and input box", now=pane.text)
    print("---- started ----\n" + pane.text())
    pane.tmux("resize-window", "-x", str(COLS + 20), "-y", str(ROWS + 6))
    wide = "─" * (COLS + 10)  # the input box spans the new width
    pane.wait(lambda: wide in pane.text(), "the input box redrawn at the new width",
              now=pane.text)
    pane.tmux("send-keys", "-l", "TUI: run the host command")
    pane.wait(lambda: pane.has("TUI: run the host command"), "the typed prompt", now=pane.text)
    pane.tmux("send-keys", "Enter")
    pane.wait(lambda: pane.has(QUESTION.strip()), "the escalation prompt", now=pane.text)
    assert pane.has("'asked in the TUI'"), pane.text()
    time.sleep(PROMPT_GRACE + 0.2)  # keys sooner are ignored (src/client/prompt.c)
    pane.tmux("send-keys", "y", "Enter")
    pane.wait(lambda: pane.has(TUI_DONE), "the agent's answer after the prompt", now=pane.text)
    after = pane.text()
    print("---- after the prompt ----\n" + after)
    assert QUESTION.strip() not in after and "Host escalation request" not in after, \
        "the prompt is still on the agent's screen:\n" + after
    assert "bypass permissions" in after and wide in after, \
        "the agent's input box is not on the screen after the prompt:\n" + after
    assert esc.host.ran("tool")[-1] == (str(ws.resolve()), "".join(f"[{a}]" for a in TUI_ASK))
    assert "host-ran-tui" in (provider.results("anthropic", "TUI").get(1) or "")
    pane.tmux("send-keys", "C-c")
    pane.wait(lambda: pane.has("again to exit"), "Claude Code's answer to Ctrl-C", now=pane.text)
    stop = lz.run(["stop", "--workspace", ws])
    assert stop.returncode == 0, stop.stderr
    pane.wait(lambda: pane.has("LZ-EXIT=125"), "the end of the session after lazaret stop",
              now=pane.text)
    assert pane.has("was stopped with 'lazaret stop'"), pane.text()
    modes = pane.modes()
    assert modes.startswith("0 cursor=1"), \
        f"the pane after lazaret stop is not restored ({modes}):\n{pane.text()}"


# ---- Codex CLI ------------------------------------------------------------------

CODEX_SECRETS = {"LZ_FAKE_OPENAI_KEY": "sk-lazaret-test-0000000000000000"}
# A custom model provider (the fake), its own sandbox off (gVisor is the
# sandbox), nothing asked (the script is the model), no update check.
CODEX_CONFIG = f'''model = "gpt-lz-test"
model_provider = "lzfake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.lzfake]
name = "Lazaret fake"
base_url = "http://{API_NAME}/v1"
wire_api = "responses"
env_key = "LZ_FAKE_OPENAI_KEY"
request_max_retries = 0
stream_max_retries = 0
'''


def test_codex(terms, agent_net, provider, test_images):
    net, _ = agent_net
    rig, lz = terms.rig, terms.lz
    ws = workspace(lz)
    esc = Escalations(lz)
    marks, trap_cmd = traps(lz)
    steps = agent_steps(lz, esc, trap_cmd)
    steps[1] = {"command": "sed -i 's/return a - b/return a + b/' calc.py && cat calc.py; "
                           "echo edit=$?"}
    provider = provider({"anthropic": [], "openai": steps})
    config(rig, test_images, "codex", {}, CODEX_SECRETS, esc)
    # The configuration goes to the sandbox's ~/.codex, not the workspace.
    setup = f"mkdir -p ~/.codex && cat > ~/.codex/config.toml <<'LZEOF'\n{CODEX_CONFIG}LZEOF\n"
    t = terms.shell("codex", ["bash", "-c", setup + 'exec codex exec '
                              '--dangerously-bypass-approvals-and-sandbox '
                              '"Fix the failing test in this repository."'], env=CODEX_SECRETS)
    answer_prompts(t)
    t.expect(DONE, timeout=AGENT_TIMEOUT, what="the agent's final answer")
    t.child.expect(pexpect.EOF, timeout=RUN_TIMEOUT)
    t.child.close()
    assert t.child.exitstatus == 0, t.text[-3000:]
    terms.check_report(t, t.child.exitstatus)
    results = provider.results("openai")
    assert "return a + b" in results.get(2, "") and "edit=0" in results[2], results.get(2)
    assert not any(r.get("unknown") for r in provider.records()), provider.records()
    check_results(results, offset=1)
    host_checks(rig, ws, esc, marks, net)
