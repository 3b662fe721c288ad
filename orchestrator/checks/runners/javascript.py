"""The JavaScript test runners whose every test's outcome middle asks for with no configuration:
`node --test`, jest, vitest and mocha (one module each). The hooks instrument.py and runner.py
call: which runner a line runs, how to ask it for its report, when its output says it could not
really run, and how to read a report that is not JUnit (jest's and vitest's JSON).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

from orchestrator.checks import junit
from orchestrator.checks.runners import jest, mocha, node, vitest

# Checked in this order: a line that runs two (`node --test && jest`) is read for the first.
RUNNERS: dict[str, ModuleType] = {"node-test": node, "jest": jest, "vitest": vitest, "mocha": mocha}
JSON_REPORTS = ("jest", "vitest")  # reports in jest's JSON shape; the others write JUnit
# `npm test` (`npm t`, `npm run test`) with nothing after it: npm passes what follows `--` to the
# script, so the runner's report options reach it without the script being touched
_NPM_TEST = re.compile(r"(?:^|(?<=[\s;&|(]))npm\s+(?:t|test|run\s+test|run-script\s+test)(?=\s*(?:$|[;&|)]))")
# `pnpm test` (`pnpm t`, `pnpm run test`) and `yarn test` (`yarn run test`), nothing after them:
# pnpm (7 and later) and yarn (1 and berry) pass what follows the script's name to the script, and
# pass a `--` there on as it is (pnpm, yarn berry; yarn 1 drops it with a warning), so no `--` is added
_PM_TEST = re.compile(r"(?:^|(?<=[\s;&|(]))(?:pnpm\s+(?:t|test|run\s+test)|yarn\s+(?:test|run\s+test))"
                      r"(?=\s*(?:$|[;&|)]))")
_COMPOUND = re.compile(r"&&|\|\||[;|]")


def runner_of(line: str) -> str:
    return next((name for name, module in RUNNERS.items() if module.detects(line)), "")


def script_runner(line: str, cwd: Path | None) -> str:
    """The runner of the project's test script when `line` runs it by `npm test` (`pnpm test`,
    `yarn test`) and the script is that runner alone (`jest --ci`; not `jest && eslint .`, whose
    report options would go to eslint).
    `node --test` is asked through NODE_OPTIONS, so any script that runs it will do."""
    if cwd is None or not (_NPM_TEST.search(line) or _PM_TEST.search(line)):
        return ""
    try:  # the project's own file: anything unexpected is no guess
        script = json.loads((cwd / "package.json").read_text(encoding="utf-8"))["scripts"]["test"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if not isinstance(script, str):
        return ""
    runner = runner_of(script)
    if runner == "vitest" and vitest.bails(script):
        # vitest refuses --bail=0 beside the script's own --bail, and options after `npm test --`
        # cannot take the script's out: read as a wrapper, whose preload takes it out of vitest's
        # argv and adds --bail=0 (jest_argv.cjs), so every test runs and is read
        return ""
    return runner if runner == "node-test" or (runner and not _COMPOUND.search(script)) else ""


def prepare(runner: str, line: str, tmp: Path, environ: dict[str, str]) -> tuple[str, dict[str, str], list[str]]:
    """The line to run, the environment it needs, and where its report goes."""
    if runner != "node-test" and not RUNNERS[runner].detects(line):  # `npm test`: the options after `--`
        flags, env, reports = RUNNERS[runner].options(tmp)
        if not _NPM_TEST.search(line):  # `pnpm test`, `yarn test`: the options right after it
            return _PM_TEST.sub(lambda m: f"{m.group(0)} {flags}", line, count=1), env, reports
        return _NPM_TEST.sub(lambda m: f"{m.group(0)} -- {flags}", line, count=1), env, reports
    return RUNNERS[runner].prepare(line, tmp, environ)  # type: ignore[no-any-return]


def cannot_run(runner: str, exit_code: int, output: str) -> str | None:
    return RUNNERS[runner].cannot_run(exit_code, output)  # type: ignore[no-any-return]


def read(runner: str, files: list[Path], cwd: Path) -> junit.JUnitReport:
    return jest.read(files, cwd, by_location=runner == "jest") if runner in JSON_REPORTS else junit.read(files)


__all__ = ["JSON_REPORTS", "RUNNERS", "cannot_run", "prepare", "read", "runner_of", "script_runner"]
