# SPDX-License-Identifier: Apache-2.0
"""The manual page and the shell completions (issue 12, item 8): they render,
they are installed, and they name every command and every option that the
binary's own --help texts name — so a new option without its documentation
fails here."""

import json
import os
import re
import subprocess

import pytest

MANUAL = "man/lazaret.1"
BASH = "completions/lazaret.bash"
ZSH = "completions/_lazaret"


def commands(lz):
    p = lz.run(["help"])
    assert p.returncode == 0, p.stderr
    return re.findall(r"^  (\w+)\s", p.stdout.split("Options:")[0], re.M)


def options_of(lz, argv):
    p = lz.run(argv + ["--help"])
    assert p.returncode == 0, (argv, p.stderr)
    return set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", p.stdout)) - {"--"}


def every_option(lz):
    found = {}
    for cmd in commands(lz):
        if cmd in ("help", "version"):
            continue
        for opt in options_of(lz, [cmd]):
            found.setdefault(opt, cmd)
    for opt in options_of(lz, []):
        found.setdefault(opt, "lazaret")
    return found


def test_manual_renders_without_warnings(repo_root):
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", str(repo_root / MANUAL)],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    # Control: the same check notices a broken macro.
    broken = (repo_root / MANUAL).read_text().replace(".SH NAME", ".SH NAME\n.BOGUS x", 1)
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=broken,
                       capture_output=True, text=True)
    assert p.stderr != "", "groff -ww did not warn about an unknown macro"


@pytest.mark.parametrize("doc", [MANUAL, BASH, ZSH])
def test_every_command_and_option_documented(lz, repo_root, doc):
    text = (repo_root / doc).read_text()
    if doc == MANUAL:
        text = text.replace("\\-", "-")
    cmds = commands(lz)
    assert {"run", "stop", "state", "status", "config", "doctor"} <= set(cmds)
    missing = [c for c in cmds if not re.search(rf"(?<![\w-]){c}(?![\w-])", text)]
    assert not missing, f"{doc} does not name the commands {missing}"
    opts = every_option(lz)
    assert "--workspace" in opts and "--json" in opts  # control: the scan finds options
    missing = sorted(o for o in opts if not re.search(rf"{re.escape(o)}(?![\w-])", text))
    assert not missing, f"{doc} does not name the options {missing} (of {[opts[o] for o in missing]})"


def bash_complete(repo_root, line, home):
    """COMPREPLY of the installed-style completion for the words of line
    (the last word is the one being completed; a trailing space = empty)."""
    script = f"""
source /usr/share/bash-completion/bash_completion
source {repo_root / BASH}
COMP_LINE={json.dumps(line)}
read -ra COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *' ' ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 ))
COMP_POINT=${{#COMP_LINE}}
_lazaret lazaret "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, env=env, timeout=30)
    assert p.returncode == 0, p.stderr
    return sorted(w for w in p.stdout.split("\n") if w)


def test_bash_completion(repo_root, tmp_path):
    cfg = tmp_path / ".config" / "lazaret"
    cfg.mkdir(parents=True)
    (cfg / "config.toml").write_text(
        'schema = "lazaret-trusted-host-config-v1"\n'
        '[profiles.alpha]\nimage = "oci:/x:y"\n'
        '[profiles.beta-2]   # a comment\nimage = "oci:/x:y"\n'
        '[profiles.alpha.escalation]\nenabled = false\n')
    assert bash_complete(repo_root, "lazaret st", tmp_path) == ["state", "status", "stop"]
    assert bash_complete(repo_root, "lazaret run ", tmp_path) == ["alpha", "beta-2"]
    assert bash_complete(repo_root, "lazaret stop --profile a", tmp_path) == ["alpha"]
    assert bash_complete(repo_root, "lazaret state ", tmp_path) == \
        ["--help", "fix-ownership", "inspect", "list", "reset", "verify"]
    assert "--yes" in bash_complete(repo_root, "lazaret state reset --", tmp_path)
    # After "--" the words are the sandboxed command's, not Lazaret's.
    assert bash_complete(repo_root, "lazaret run alpha -- st", tmp_path) == []
    # Control: without a configuration there are no profiles to offer.
    (cfg / "config.toml").unlink()
    assert bash_complete(repo_root, "lazaret run ", tmp_path) == []


def test_zsh_completion_parses(repo_root):
    p = subprocess.run(["zsh", "-n", str(repo_root / ZSH)], capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    # Control: zsh -n does reject a syntax error.
    p = subprocess.run(["zsh", "-n"], input="_f() { case x in\n", capture_output=True, text=True)
    assert p.returncode != 0


def test_installed(lazaret_bin, skip_or_fail):
    build = lazaret_bin.parent.parent.parent
    p = subprocess.run(["meson", "introspect", "--installed", str(build)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        skip_or_fail(f"{build} is not a meson build directory: {p.stderr.strip()}")
    dests = set(json.loads(p.stdout).values())
    assert any(d.endswith("/share/man/man1/lazaret.1") for d in dests), dests
    assert any(d.endswith("/share/bash-completion/completions/lazaret") for d in dests), dests
    assert any(d.endswith("/share/zsh/site-functions/_lazaret") for d in dests), dests
