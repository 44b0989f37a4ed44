# SPDX-License-Identifier: Apache-2.0
"""`lazaret init AGENT` and the configuration examples of the documentation
(issue 26).

- Every agent's starter profile is written into a new or an existing file,
  loads, and says what docs/agents.md promises (the agent's configuration
  directory is a profile volume with the agent's variable pointing at it);
  a second profile of the same name, a v1 file and an invalid file are
  refused and the file is left as it was.
- A starter profile starts a Domain: its default command runs (and, in an
  image without npm, fails with the installer's message), the agent's
  directory is the host's profile volume.
- Every ```toml block of README.md and docs/*.md loads: a whole file as it
  is, a fragment inside a minimal v2 file (`config check` of every profile it
  names). The README's first example once did not parse (issue 26).
"""

import json
import re
import tomllib

import pytest

from conftest import ok

AGENTS = {
    # agent: (its configuration directory, the variable that names it or None)
    "claude": ("/root/.claude", "CLAUDE_CONFIG_DIR"),
    "codex": ("/root/.codex", "CODEX_HOME"),
    "gemini": ("/root/.gemini", None),
    "opencode": ("/root/.local/share/opencode", None),
}


def _check_json(lz, profile, ws):
    p = ok(lz.run(["config", "check", profile, "--workspace", str(ws), "--json"]))
    return json.loads(p.stdout)


def test_init_writes_a_loading_profile_for_each_agent(lz):
    ws = lz.mkdir("project")
    for agent in AGENTS:
        p = ok(lz.run(["init", agent]))
        assert f"lazaret run {agent}" in p.stdout, p.stdout
    cfg = lz.config_path
    assert (cfg.stat().st_mode & 0o777) == 0o600
    text = cfg.read_text()
    for agent, (conf_dir, var) in AGENTS.items():
        got = _check_json(lz, agent, ws)
        assert got["command"][0] == "sh" and agent in got["command"][2], got["command"]
        vols = {v["destination"]: v for v in got["volumes"]}
        assert conf_dir in vols and vols[conf_dir]["access"] == "read-write", got["volumes"]
        assert vols[conf_dir]["source"] == got["profile_dir"] + "/config"
        values = {e["name"]: e["value"] for e in got["environment_values"]}
        if var:
            assert values.get(var) == conf_dir, values
        assert "registry.npmjs.org" in json.dumps(got), got
        assert got["escalation"]["enabled"] is True
    # The same name again, a v1 file, an invalid file: refused, untouched.
    p = lz.run(["init", "claude"])
    assert p.returncode == 1 and "already has a profile 'claude'" in p.stderr, p.stderr
    assert "--profile claude-2" in p.stderr
    assert cfg.read_text() == text
    ok(lz.run(["init", "claude", "--profile", "claude-2"]))
    assert "[profiles.claude-2]" in cfg.read_text()
    v1 = 'schema = "lazaret-trusted-host-config-v1"\n[profiles.a]\nimage = "x"\n'
    lz.write(cfg, v1)
    p = lz.run(["init", "codex"])
    assert p.returncode == 1 and "v1 configuration" in p.stderr and "schema =" in p.stderr, \
        p.stderr
    assert cfg.read_text() == v1
    lz.write(cfg, v1 + "[profiles.x\n")
    p = lz.run(["init", "codex"])
    assert p.returncode == 1 and "not valid as it is" in p.stderr, p.stderr
    assert cfg.read_text() == v1 + "[profiles.x\n"
    # A file with the schema line alone is completed, not refused.
    lz.write(cfg, 'schema = "lazaret-trusted-host-config-v2"\n')
    ok(lz.run(["init", "opencode"]))
    _check_json(lz, "opencode", ws)
    # --print writes nothing and prints a profile that loads on its own.
    cfg.unlink()
    p = ok(lz.run(["init", "gemini", "--print"]))
    assert not cfg.exists()
    lz.write(cfg, 'schema = "lazaret-trusted-host-config-v2"\n' + p.stdout)
    _check_json(lz, "gemini", ws)


def test_a_starter_profile_starts_the_agent_with_its_directory_kept(rig, test_images):
    """The claude starter profile on the busybox test image: an explicit
    command sees CLAUDE_CONFIG_DIR on the profile volume (a file written
    there is on the host, in the profile's directory, for every project);
    the default command runs the installer, which fails here for want of
    npm: exit 125 with its message (the control that the default command,
    not a shell, ran)."""
    ok(rig.lz.run(["init", "claude", "--image", test_images.busybox]))
    got = _check_json(rig.lz, "claude", rig.ws)
    p = ok(rig.lz.run(["run", "claude", "--workspace", str(rig.ws), "--", "sh", "-c",
                       'echo "$CLAUDE_CONFIG_DIR"; echo kept > "$CLAUDE_CONFIG_DIR/settings.json"'
                       ]))
    assert p.stdout == "/root/.claude\n", p.stdout
    kept = rig.lz.path(got["profile_dir"]) / "config" / "settings.json"
    assert kept.read_text() == "kept\n"
    p = rig.lz.run(["run", "claude", "--workspace", str(rig.ws)])
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)
    assert "installing @anthropic-ai/claude-code (once)" in p.stderr, p.stderr


# ---- the documentation's examples ---------------------------------------------------------

def _toml_blocks(repo_root):
    files = [repo_root / "README.md", *sorted((repo_root / "docs").glob("*.md"))]
    for f in files:
        for i, m in enumerate(re.finditer(r"```toml\n(.*?)```", f.read_text(), re.S)):
            yield f"{f.name}#{i + 1}", m.group(1)


BASE_IMAGE = 'image = "docker.io/library/debian:bookworm"\n'


def _as_file(block: str) -> str:
    """A whole file as it is; a fragment inside a minimal v2 file whose
    profile `claude` has an image."""
    if re.search(r"^schema\s*=", block, re.M):
        return block
    head = 'schema = "lazaret-trusted-host-config-v2"\n'
    m = re.search(r"^\[profiles\.claude\]\n", block, re.M)
    if m:
        if not re.search(r"^image\s*=", block, re.M):
            block = block[:m.end()] + BASE_IMAGE + block[m.end():]
        return head + block
    return head + "[profiles.claude]\n" + BASE_IMAGE + block


def test_every_configuration_example_in_the_docs_loads(lz, repo_root):
    blocks = list(_toml_blocks(repo_root))
    assert len(blocks) >= 5, [name for name, _ in blocks]
    ws = lz.mkdir("project")
    failed = []
    for name, block in blocks:
        text = _as_file(block)
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            failed.append(f"{name}: not TOML 1.0: {e}\n{block}")
            continue
        # Host paths the example names must exist, as on the reader's machine.
        for prof in doc.get("profiles", {}).values():
            for v in prof.get("volumes", []):
                if v["host"].startswith("~/") and not v.get("create"):
                    lz.mkdir(v["host"][2:])
        lz.write(lz.config_path, text)
        for profile in doc.get("profiles", {}):
            p = lz.run(["config", "check", profile, "--workspace", str(ws)])
            if p.returncode != 0:
                failed.append(f"{name}: config check {profile}: {p.stderr}\n{text}")
    assert not failed, "\n\n".join(failed)
