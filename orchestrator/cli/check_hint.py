"""The `[check]` section `middle init` writes: the test runner it finds in the project, commented out
(a person confirms it before tickets are held to it), else a commented example.

Only files are read (nothing is run): a runner's usual marks, each cheap to look for.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

# What npm writes into a new package.json: a test script that always fails is no test suite.
NPM_PLACEHOLDER = "no test specified"
PYTEST_SECTION = re.compile(r"^\s*\[tool\.pytest[.\]]", re.MULTILINE)
TOX_SECTION = re.compile(r"^\s*\[tool\.tox[.\]]", re.MULTILINE)
MAKE_TEST = re.compile(r"^test\s*:(?!=)", re.MULTILINE)  # a `test` target (not `test := ...`)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    except OSError:  # unreadable: as if absent (init only suggests)
        return ""


def _pytest(root: Path) -> str | None:
    """Why the project looks like a pytest one, or None."""
    if (root / "pytest.ini").is_file():
        return "pytest.ini"
    if PYTEST_SECTION.search(_read(root / "pyproject.toml")):
        return "[tool.pytest] in pyproject.toml"
    tests = root / "tests"
    if tests.is_dir() and next(tests.rglob("test_*.py"), None) is not None:
        return "tests/test_*.py"
    return None


def _npm(root: Path) -> str | None:
    text = _read(root / "package.json")
    if not text:
        return None
    try:
        scripts = json.loads(text).get("scripts")
    except (ValueError, AttributeError):  # not JSON, or not an object: no guess
        return None
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if isinstance(test, str) and test.strip() and NPM_PLACEHOLDER not in test:
        return "the test script of package.json"
    return None


def _package_manager(root: Path) -> str:
    """The package manager whose lock file the project keeps (its `test` reads the same script)."""
    if (root / "pnpm-lock.yaml").is_file():
        return "pnpm"
    return "yarn" if (root / "yarn.lock").is_file() else "npm"


def _rspec(root: Path) -> tuple[str, str] | None:
    """`rspec` (through bundler when there is a Gemfile) and why, or None."""
    spec = root / "spec"
    if (root / ".rspec").is_file():
        why = ".rspec"
    elif spec.is_dir() and next(spec.rglob("*_spec.rb"), None) is not None:
        why = "spec/*_spec.rb"
    else:
        return None
    return ("bundle exec rspec" if (root / "Gemfile").is_file() else "rspec"), why


def _wrapper(root: Path) -> tuple[str, str] | None:
    """The project's own way to run its tests (a Makefile's `test` target, tox, nox), or None.
    Suggested only where no runner shows: a line that names its runner is read the same way
    with nothing behind it to miss (docs/checks.md, "Behind a wrapper")."""
    for name in ("GNUmakefile", "makefile", "Makefile"):
        if MAKE_TEST.search(_read(root / name)):
            return "make test", f"the test target of {name}"
    if (root / "tox.ini").is_file() or (root / "tox.toml").is_file():
        return "tox", "tox.ini" if (root / "tox.ini").is_file() else "tox.toml"
    if TOX_SECTION.search(_read(root / "pyproject.toml")):
        return "tox", "[tool.tox] in pyproject.toml"
    if (root / "noxfile.py").is_file():
        return "nox", "noxfile.py"
    return None


def detect(root: Path) -> list[tuple[str, str]]:
    """(command, why) for each test runner the project at `root` shows, in a fixed order; else the
    wrapper it runs its tests with (make, tox, nox)."""
    found = []
    if why := _pytest(root):
        found.append(("python -m pytest -q", why))
    if why := _npm(root):
        found.append((f"{_package_manager(root)} test", why))
    if (root / "go.mod").is_file():
        found.append(("go test ./...", "go.mod"))
    if (root / "Cargo.toml").is_file():
        found.append(("cargo test", "Cargo.toml"))
    if rspec := _rspec(root):
        found.append(rspec)
    if not found and (wrapper := _wrapper(root)):
        found.append(wrapper)
    return found


def check_section(root: Path) -> str:
    """The commented `[check]` block of the starter config."""
    found = detect(root)
    head = ("\n# Done means these pass: run in the ticket's worktree when the middle agent says complete; a\n"
            "# failure worse than on the base commit goes back to it (see README, \"[check]\").\n")
    if not found:
        return head + ('# [check]\n# commands = ["python -m pytest -q"]   # no test runner found here: '
                       "name yours\n# max_rounds = 3\n")
    commands = ", ".join(json.dumps(c) for c, _ in found)
    why = "; ".join(f"{c}: {w}" for c, w in found)
    return head + (f"# found {why}; uncomment to use it\n# [check]\n# commands = [{commands}]\n# max_rounds = 3\n")
