# SPDX-License-Identifier: Apache-2.0
"""Run the compiled test programs of the ASan/UBSan build from pytest, so that
one `pytest tests/` (scripts/check.sh) covers every layer (docs/testing.md):

  - every cmocka binary build-asan/tests/unit/test_* is one pytest test; it
    fails with the names of the failing cmocka cases;
  - every libFuzzer binary build-asan/tests/fuzz/fuzz_* gets a smoke run over
    a copy of its seed corpus tests/fuzz/corpus/<binary name>/ (default 5 s,
    env LAZARET_FUZZ_SECONDS); scripts/fuzz.sh is the long run;
  - every tests/unit/test_*.c and tests/fuzz/fuzz_*.c has its binary: a
    source missing from its meson.build list, or a build directory configured
    before the file existed (meson evaluates fs.exists() only at setup), would
    otherwise drop its tests silently.

The build directory is env LAZARET_ASAN_BUILD, default <repo>/build-asan.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("LAZARET_ASAN_BUILD", REPO / "build-asan")).resolve()
UNIT_DIR = BUILD / "tests" / "unit"
FUZZ_DIR = BUILD / "tests" / "fuzz"
CORPUS_DIR = REPO / "tests" / "fuzz" / "corpus"
FUZZ_SECONDS = int(os.environ.get("LAZARET_FUZZ_SECONDS", "3"))
UNIT_TIMEOUT = 300
TAP_PLAN = re.compile(r"^1\.\.(\d+)\s*$", re.M)
TAP_NOT_OK = re.compile(r"^not ok \d+ - (.*)$", re.M)
TAP_OK = re.compile(r"^ok \d+ - ", re.M)


def _binaries(directory: Path, prefix: str):
    """Executable regular files prefix* in directory, as pytest params; one
    param of None (reported as a skip) when there are none."""
    if directory.is_dir():
        found = sorted(p for p in directory.iterdir()
                       if p.name.startswith(prefix) and p.is_file() and os.access(p, os.X_OK))
        if found:
            return [pytest.param(p, id=p.name) for p in found]
    return [pytest.param(None, id=f"no-{prefix.rstrip('_')}-binaries")]


def _sources(kind: str, prefix: str):
    return sorted(p.stem for p in (REPO / "tests" / kind).glob(f"{prefix}*.c"))


def _no_binaries(kind: str, prefix: str, directory: Path, skip_or_fail):
    if _sources(kind, prefix):
        skip_or_fail(f"no {prefix}* binaries in {directory}: run scripts/build.sh asan build-asan")
    pytest.skip(f"no tests/{kind}/{prefix}*.c sources yet")


def _hermetic_env(tmp_path: Path, sanitizer_env: dict, **extra) -> dict:
    # Nothing from the developer's environment leaks in: same result on
    # every machine and in CI.
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "LANG": "C.UTF-8",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        **sanitizer_env,
        **extra,
    }


@pytest.mark.parametrize("binary", _binaries(UNIT_DIR, "test_"))
def test_cmocka(binary, tmp_path, sanitizer_env, skip_or_fail, assert_no_sanitizer_report):
    if binary is None:
        _no_binaries("unit", "test_", UNIT_DIR, skip_or_fail)
    proc = subprocess.run(
        [str(binary)], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        errors="replace", timeout=UNIT_TIMEOUT,
        env=_hermetic_env(tmp_path, sanitizer_env, CMOCKA_MESSAGE_OUTPUT="TAP"))
    output = proc.stdout + proc.stderr
    assert_no_sanitizer_report(proc, binary.name)
    failed = TAP_NOT_OK.findall(proc.stdout)
    assert not failed, f"{binary.name}: failing cmocka cases: {', '.join(failed)}\n{output}"
    assert proc.returncode == 0, f"{binary.name} exited with {proc.returncode}\n{output}"
    plans = [int(n) for n in TAP_PLAN.findall(proc.stdout)]
    assert plans, f"{binary.name} printed no TAP plan (is CMOCKA_MESSAGE_OUTPUT honoured?)\n{output}"
    ran = len(TAP_OK.findall(proc.stdout))
    assert ran == sum(plans), f"{binary.name}: {ran} cases passed of {sum(plans)} planned\n{output}"


@pytest.mark.parametrize("fuzzer", _binaries(FUZZ_DIR, "fuzz_"))
def test_fuzz_smoke(fuzzer, tmp_path, sanitizer_env, skip_or_fail):
    if fuzzer is None:
        _no_binaries("fuzz", "fuzz_", FUZZ_DIR, skip_or_fail)
    # Work on a copy: libFuzzer adds every new interesting input to the
    # corpus directory it is given, and the repository must stay unchanged.
    corpus = tmp_path / "corpus"
    seeds = CORPUS_DIR / fuzzer.name
    if seeds.is_dir():
        shutil.copytree(seeds, corpus)
    else:
        corpus.mkdir()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    argv = [str(fuzzer), f"-max_total_time={FUZZ_SECONDS}", "-timeout=5", "-rss_limit_mb=2048",
            f"-artifact_prefix={artifacts}/", "-print_final_stats=1"]
    dictionary = REPO / "tests" / "fuzz" / f"{fuzzer.name}.dict"
    if dictionary.is_file():
        argv.append(f"-dict={dictionary}")
    argv.append(str(corpus))
    proc = subprocess.run(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, errors="replace", timeout=FUZZ_SECONDS + 300,
                          env=_hermetic_env(tmp_path, sanitizer_env))
    crashes = sorted(p.name for p in artifacts.iterdir())
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-60:])
    assert proc.returncode == 0 and not crashes, (
        f"{fuzzer.name} exited with {proc.returncode}; artifacts in {artifacts}: {crashes} "
        f"(reproduce: {fuzzer} <artifact>)\n{tail}")


@pytest.mark.parametrize("kind,prefix,directory", [("unit", "test_", UNIT_DIR),
                                                   ("fuzz", "fuzz_", FUZZ_DIR)],
                         ids=["unit", "fuzz"])
def test_every_source_is_built(kind, prefix, directory, skip_or_fail):
    sources = _sources(kind, prefix)
    if not sources:
        pytest.skip(f"no tests/{kind}/{prefix}*.c sources yet")
    if not directory.is_dir():
        skip_or_fail(f"{directory} does not exist: run scripts/build.sh asan build-asan")
    missing = [name for name in sources if not (directory / name).is_file()]
    assert not missing, (
        f"not built: {missing}; list them in tests/{kind}/meson.build, then "
        f"meson setup --reconfigure {BUILD} (fs.exists() is evaluated at setup only)")
