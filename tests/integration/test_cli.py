# SPDX-License-Identifier: Apache-2.0
"""The command-line front door: help, version, dispatch, exit statuses and the
refusal to run as root (SR-1)."""

import os
import re

import pytest

COMMANDS = ["run", "status", "state", "config", "stop", "doctor", "export", "log", "init", "image"]


def project_version(repo_root):
    text = (repo_root / "meson.build").read_text()
    return re.search(r"version\s*:\s*'([^']+)'", text).group(1)


def test_version(lz, repo_root):
    p = lz.run(["--version"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"lazaret {project_version(repo_root)}\n"


def test_help_lists_every_command(lz):
    p = lz.run(["--help"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Usage: lazaret")
    listed = re.findall(r"^  (\w+)\s", p.stdout, re.M)
    assert listed[:len(COMMANDS)] == COMMANDS


def test_no_command_is_a_usage_error(lz):
    p = lz.run([])
    assert p.returncode == 2
    assert "Usage: lazaret" in p.stderr


@pytest.mark.parametrize("cmd", COMMANDS)
def test_command_help(lz, cmd):
    for flag in ("--help", "-h"):
        p = lz.run([cmd, flag])
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("Usage: lazaret"), p.stdout
        assert f" {cmd}" in p.stdout.splitlines()[0]
        assert p.stderr == ""


def test_unknown_command(lz):
    p = lz.run(["frobnicate"])
    assert p.returncode == 2
    assert "unknown command 'frobnicate'" in p.stderr
    assert "lazaret --help" in p.stderr


def test_unknown_global_option(lz):
    p = lz.run(["--frobnicate", "doctor"])
    assert p.returncode == 2
    assert "unknown option '--frobnicate'" in p.stderr


def test_run_usage_errors(lz):
    p = lz.run(["run"])
    assert p.returncode == 2
    assert "missing PROFILE" in p.stderr
    p = lz.run(["run", "p", "--frobnicate"])
    assert p.returncode == 2
    assert "unknown option '--frobnicate'" in p.stderr
    p = lz.run(["run", "p", "extra"])
    assert p.returncode == 2
    assert "put the command after '--'" in p.stderr


def test_run_with_invalid_configuration_is_a_lazaret_failure(lz):
    # No configuration file at all: Lazaret fails (125), not the command.
    p = lz.run(["run", "p", "--", "true"])
    assert p.returncode == 125
    assert "configuration" in p.stderr and "fix:" in p.stderr


def test_status_without_running_domains(lz):
    p = lz.run(["status"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "No Domain is running."
    p = lz.run(["status", "--json"])
    assert p.returncode == 0
    assert p.stdout.strip() == "[]"
    p = lz.run(["status", "extra"])
    assert p.returncode == 2


@pytest.mark.parametrize("sub", ["inspect", "verify", "reset"])
def test_state_commands_without_a_domain_say_which_and_how(lz, write_profiles, sub):
    """(issue 12 item 2) No Domain has state yet: refused with what was
    looked for and a fix; a profile name given as DOMAIN is a usage error."""
    write_profiles(lz, {"bb": {}})
    ws = lz.mkdir("ws")
    p = lz.run(["state", sub, "--workspace", ws, "--yes"] if sub == "reset" else
               ["state", sub, "--workspace", ws])
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert f"no Domain has state for the workspace {ws}" in p.stderr, p.stderr
    assert "fix:" in p.stderr and "lazaret state list" in p.stderr, p.stderr
    p = lz.run(["state", sub, "myprofile"])
    assert p.returncode == 2 and "not a Domain ID prefix" in p.stderr, p.stderr


@pytest.mark.parametrize("cmd,status", [("config", 1), ("doctor", 1), ("run", 125),
                                        ("status", 1), ("state", 1), ("stop", 1),
                                        ("log", 1)])
def test_root_is_refused(lz, cmd, status):
    args = [cmd, "check", "default"] if cmd == "config" else [cmd]
    p = lz.run(args, as_root=True)
    assert p.returncode == status, p.stderr
    assert "refusing to run as root" in p.stderr
    assert "fix:" in p.stderr and "unprivileged user" in p.stderr
    assert p.stdout == ""


def test_help_works_as_root(lz):
    # Reading the help changes nothing, so it is not refused.
    p = lz.run(["doctor", "--help"], as_root=True)
    assert p.returncode == 0
    assert p.stdout.startswith("Usage: lazaret doctor")


# ---- issue 12, item 8: the small things ------------------------------------------

def test_version_and_help_commands(lz, repo_root):
    p = lz.run(["version"])
    assert (p.returncode, p.stdout) == (0, f"lazaret {project_version(repo_root)}\n"), p.stderr
    p = lz.run(["help"])
    assert p.returncode == 0 and p.stdout == lz.run(["--help"]).stdout
    for cmd in COMMANDS:
        p = lz.run(["help", cmd])
        assert p.returncode == 0, p.stderr
        assert p.stdout == lz.run([cmd, "--help"]).stdout
    p = lz.run(["help", "frobnicate"])
    assert p.returncode == 2 and "unknown command 'frobnicate'" in p.stderr


def test_a_world_writable_workspace_is_refused(lz, write_profiles):
    """/tmp-like directories are nobody's project: refused with the fix.
    Control: the same directory at 0755 is accepted."""
    write_profiles(lz, {"bb": {}})
    shared = lz.mkdir("shared-drop", mode=0o1777)
    p = lz.run(["config", "check", "bb", "--workspace", str(shared)])
    assert p.returncode != 0, p.stdout
    assert f"the workspace {shared} is writable by every user (mode 1777)" in p.stderr, p.stderr
    assert "fix:" in p.stderr
    p = lz.run(["run", "bb", "--workspace", str(shared), "--", "true"])
    assert p.returncode == 125 and "writable by every user" in p.stderr, p.stderr
    os.chmod(shared, 0o755)
    p = lz.run(["config", "check", "bb", "--workspace", str(shared)])
    assert p.returncode == 0, p.stderr
