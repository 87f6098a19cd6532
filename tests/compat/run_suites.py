"""Run langchain's and langgraph-prebuilt's own test suites against our classes (make compat).

For each peer suite, the sdist of the installed version is fetched from the package index into a
cache (the project holds none of their code), then the suite runs twice with pytest: as shipped,
and on a copy whose one import of the peer's class is swapped for ours (tests/compat/swap.py).
It prints pass / fail / skip for both, and exits 1 when the originals do not all pass, when ours
fails a test that tests/compat/known_failures.toml does not list, when a listed test no longer
fails, or when fewer tests pass than the suite's floor; 2 when a suite could not run at all.

    .venv/bin/python -m tests.compat.run_suites                  # what make compat runs
    .venv/bin/python -m tests.compat.run_suites --suite hitl     # one suite
    .venv/bin/python -m tests.compat.run_suites --update-known-failures

The cache is .cache/compat/ in the repository, or the directory APPROVALS_COMPAT_CACHE names.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.compat.outcomes import (
    Counts,
    Floor,
    Outcome,
    ReportError,
    check_known,
    load_known_failures,
    outcomes_from_junit,
    render_known_failures,
    updated_known_failures,
)
from tests.compat.swap import SwapError, swap_import

ROOT = Path(__file__).resolve().parents[2]
KNOWN_FAILURES = Path(__file__).resolve().parent / "known_failures.toml"
CACHE_SETTING = "APPROVALS_COMPAT_CACHE"

# The plugins their suites use, named so that none of ours (the conformance kit's, schemathesis',
# langsmith's) joins in: pytest-asyncio (asyncio_mode = auto), anyio (langgraph-prebuilt's
# pytestmark), pytest-mock (mocker), syrupy (langchain's addopts), pytest-recording (langchain's
# conftest implements its hook), pytest-socket (langchain runs with --disable-socket), and
# pytest-timeout, so that a hang in our class fails one test instead of make test.
PLUGINS = (
    "pytest_asyncio.plugin",
    "anyio.pytest_plugin",
    "pytest_mock",
    "syrupy",
    "pytest_recording.plugin",
    "pytest_socket",
    "pytest_timeout",
)
TEST_TIMEOUT_S = 60
RUN_TIMEOUT_S = 900


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Suite:
    """One peer test module, and the peer's class that ours stands in for in it."""

    key: str
    distribution: str
    test_file: str
    module: str
    name: str
    replacement: str
    floor: Floor
    pytest_args: tuple[str, ...] = ()


# The floors are issue 31's acceptance. Its 85 for HITL counts parametrized cases, its 44 for
# ToolNode test functions (81 cases; a function passes when each of its cases passes).
SUITES = (
    Suite(
        key="hitl",
        distribution="langchain",
        test_file="tests/unit_tests/agents/middleware/implementations/test_human_in_the_loop.py",
        module="langchain.agents.middleware.human_in_the_loop",
        name="HumanInTheLoopMiddleware",
        replacement="graphs.langchain.middleware.ApprovalMiddleware",
        floor=Floor(passing=80, of=85, unit="cases"),
        # As langchain's Makefile runs its unit tests.
        pytest_args=("--disable-socket", "--allow-unix-socket"),
    ),
    Suite(
        key="toolnode",
        distribution="langgraph-prebuilt",
        test_file="tests/test_tool_node.py",
        module="langgraph.prebuilt",
        name="ToolNode",
        replacement="graphs.langchain.tool_node.GovernedToolNode",
        floor=Floor(passing=40, of=44, unit="functions"),
    ),
)

SUITE_KEYS = frozenset(s.key for s in SUITES)


class CompatError(Exception):
    """A suite could not be fetched or run (as opposed to tests that failed)."""


def cache_dir() -> Path:
    cache = Path(os.environ.get(CACHE_SETTING) or ROOT / ".cache" / "compat").resolve()
    # Their test modules there would be collected by the project's own pytest run.
    if cache.is_relative_to(ROOT / "tests"):
        raise CompatError(f"{CACHE_SETTING}={cache}: not under tests/, which pytest collects")
    return cache


def unpacked_suite(suite: Suite, version: str, cache: Path) -> Path:
    """The sdist's tests/ and pyproject.toml (their pytest configuration), fetched and unpacked
    once per version. The package's own code is left out: the installed one is under test."""
    target = cache / f"{suite.distribution}-{version}" / "original"
    if target.is_dir():
        return target
    downloads = cache / "downloads" / f"{suite.distribution}-{version}"
    if not any(downloads.glob("*.tar.gz")):
        downloads.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q"]
        command += ["--no-binary", ":all:", "--no-deps", "--dest", str(downloads)]
        command.append(f"{suite.distribution}=={version}")
        fetched = subprocess.run(command, capture_output=True, text=True, check=False)
        if fetched.returncode:
            raise CompatError(f"pip download {suite.distribution}=={version}:\n{fetched.stderr}")
    archives = sorted(downloads.glob("*.tar.gz"))
    if len(archives) != 1:
        raise CompatError(f"expected one sdist in {downloads}, found {len(archives)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Unpacked beside the target and renamed: an interrupted run leaves no half a suite.
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".unpacking-"))
    try:
        with tarfile.open(archives[0]) as archive:
            for member in archive.getmembers():
                _, _, inner = member.name.partition("/")
                if inner == "pyproject.toml" or inner.startswith("tests/"):
                    member.name = inner
                    archive.extract(member, staging, filter="data")
        if not (staging / suite.test_file).is_file():
            raise CompatError(f"{archives[0].name} has no {suite.test_file}")
        staging.chmod(0o755)  # mkdtemp's 0700 would keep the cache to one user
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def swapped_copy(suite: Suite, original: Path) -> Path:
    """A fresh copy of the unpacked suite whose test module imports our class instead."""
    ours = original.parent / "ours"
    shutil.rmtree(ours, ignore_errors=True)
    shutil.copytree(original, ours, ignore=shutil.ignore_patterns("__pycache__"))
    test_module = ours / suite.test_file
    swapped = swap_import(
        test_module.read_text(), module=suite.module, name=suite.name, replacement=suite.replacement
    )
    test_module.write_text(swapped)
    return ours


def suite_environment() -> dict[str, str]:
    env = dict(os.environ)
    # Their `tests` package comes from the working directory (sys.path[0]); the project is on
    # the path behind it, for `import graphs`.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # In-memory checkpointers and stores only, as their fast test targets run.
    env["LANGGRAPH_TEST_FAST"] = "1"
    return env


def check_imports(tree: Path, env: Mapping[str, str]) -> None:
    """`tests` must be theirs and `graphs` ours in the pytest about to run in ``tree``."""
    probe = "import importlib.util as u; print(u.find_spec('tests').origin)"
    probe += "; print(u.find_spec('graphs').origin)"
    found = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    if not (Path(found[0]).is_relative_to(tree) and Path(found[1]).is_relative_to(ROOT / "graphs")):
        raise CompatError(f"in {tree}, tests is {found[0]} and graphs is {found[1]}")


def run_suite(suite: Suite, tree: Path, variant: str) -> dict[str, Outcome]:
    env = suite_environment()
    check_imports(tree, env)
    report, log = tree.parent / f"{variant}.xml", tree.parent / f"{variant}.log"
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "-c", "pyproject.toml", "--rootdir", "."]
    for plugin in (*PLUGINS, "no:cacheprovider"):
        command += ["-p", plugin]
    command += ["--timeout", str(TEST_TIMEOUT_S), "--junitxml", str(report)]
    command += [*suite.pytest_args, suite.test_file]
    started = time.monotonic()
    with log.open("w") as out:
        try:
            ran = subprocess.run(
                command,
                cwd=tree,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise CompatError(f"{suite.key} ({variant}): no end after {RUN_TIMEOUT_S} s") from error
    # 0: all passed, 1: some failed; anything else (collection errors, no tests) is no result.
    if ran.returncode not in (0, 1) or not report.is_file():
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise CompatError(f"{suite.key} ({variant}): pytest exited {ran.returncode}:\n{tail}")
    try:
        outcomes = outcomes_from_junit(report.read_text(), suite.test_file)
    except ReportError as error:
        raise CompatError(f"{suite.key} ({variant}): {error}; see {log}") from error
    elapsed = time.monotonic() - started
    print(f"  {suite.key} {variant}: {len(outcomes)} tests in {elapsed:.1f} s", flush=True)
    return outcomes


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SuiteResult:
    suite: Suite
    original: dict[str, Outcome]
    ours: dict[str, Outcome]


def table(results: Sequence[SuiteResult]) -> str:
    rows = [["suite", "variant", "total", "pass", "fail", "skip"]]
    for result in results:
        for variant, outcomes in (("original", result.original), ("ours", result.ours)):
            c = Counts.of(outcomes)
            rows.append(
                [result.suite.key, variant, *map(str, (c.total, c.passed, c.failed, c.skipped))]
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = zip(row, widths, strict=True)
        lines.append(
            "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(cells))
        )
    return "\n".join(lines)


def problems_of(result: SuiteResult, known: Mapping[str, str]) -> list[str]:
    """What is wrong with one suite's run, as lines to print (none: it holds)."""
    key, problems = result.suite.key, []
    original = Counts.of(result.original)
    if not original.total or original.passed != original.total:
        failing = ", ".join(n for n, o in result.original.items() if o != Outcome.PASSED)
        problems.append(f"{key}: the originals do not all pass: {failing or 'no tests ran'}")
    check = check_known(result.ours, known)
    problems += [f"{key}: fails, not in known_failures.toml: {n}" for n in check.unexpected]
    problems += [f"{key}: listed, no longer fails (remove it): {n}" for n in check.stale]
    problems += [f"{key}: listed, not in the suite (remove it): {n}" for n in check.unknown]
    floor = result.suite.floor
    counted = floor.counts(result.ours)
    if counted.passed < floor.required(counted.total):
        problems.append(
            f"{key}: {counted.passed} of {counted.total} {floor.unit} pass, "
            f"below the floor of {floor.required(counted.total)}"
        )
    return problems


def summary(results: Sequence[SuiteResult]) -> str:
    parts = []
    for r in results:
        floor, cases = r.suite.floor, Counts.of(r.ours)
        counted = floor.counts(r.ours)
        part = f"{r.suite.key} {counted.passed}/{counted.total} {floor.unit}"
        if floor.unit != "cases":
            part += f" ({cases.passed}/{cases.total} cases)"
        parts.append(f"{part}, floor {floor.required(counted.total)}")
    return "compat: ours passes " + "; ".join(parts)


def listed_reasons(suite: Suite, known: Mapping[str, str]) -> str:
    by_reason: dict[str, list[str]] = {}
    for node_id, reason in sorted(known.items()):
        by_reason.setdefault(reason, []).append(node_id.removeprefix(f"{suite.test_file}::"))
    return "".join(
        f"{suite.key}, known failures ({len(ids)}): {reason}\n" + "".join(f"    {i}\n" for i in ids)
        for reason, ids in sorted(by_reason.items())
    )


def run(suites: Sequence[Suite], cache: Path) -> list[SuiteResult]:
    trees = {}
    for suite in suites:
        version = importlib.metadata.version(suite.distribution)
        print(f"{suite.key}: {suite.test_file} of {suite.distribution} {version}", flush=True)
        original = unpacked_suite(suite, version, cache)
        try:
            trees[suite.key] = {"original": original, "ours": swapped_copy(suite, original)}
        except SwapError as error:
            raise CompatError(f"{suite.key}: {error}") from error
    # Each run is a pytest process that spends most of its few seconds importing langchain and
    # langgraph: one per core takes the four runs from about 30 s to under 20.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        runs = {
            (suite.key, variant): pool.submit(run_suite, suite, tree, variant)
            for suite in suites
            for variant, tree in trees[suite.key].items()
        }
        return [
            SuiteResult(
                suite=suite,
                original=runs[suite.key, "original"].result(),
                ours=runs[suite.key, "ours"].result(),
            )
            for suite in suites
        ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_suites", description="make compat")
    parser.add_argument("--suite", choices=sorted(SUITE_KEYS), action="append")
    parser.add_argument(
        "--update-known-failures",
        action="store_true",
        help=f"rewrite {KNOWN_FAILURES.name} from this run (keeps the reasons of entries kept)",
    )
    args = parser.parse_args(argv)
    suites = [s for s in SUITES if not args.suite or s.key in args.suite]
    known = load_known_failures(KNOWN_FAILURES.read_text()) if KNOWN_FAILURES.exists() else {}
    started = time.monotonic()
    try:
        cache = cache_dir()
        results = run(suites, cache)
    except CompatError as error:
        print(f"compat: {error}", file=sys.stderr)
        return 2
    if args.update_known_failures:
        for r in results:
            known[r.suite.key] = updated_known_failures(r.ours, known.get(r.suite.key, {}))
        KNOWN_FAILURES.write_text(render_known_failures(known))
        print(f"rewrote {KNOWN_FAILURES.relative_to(ROOT)}")
    print(f"\n{table(results)}\n")
    problems = [f"{KNOWN_FAILURES.name}: no suite {key!r}" for key in known.keys() - SUITE_KEYS]
    for r in results:
        listed = known.get(r.suite.key, {})
        if listed:
            print(listed_reasons(r.suite, listed))
        problems += problems_of(r, listed)
    for problem in problems:
        print(problem)
    print(f"{summary(results)} ({time.monotonic() - started:.0f} s; logs in {cache})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
