"""Middle's `sitecustomize`, first on PYTHONPATH behind a wrapper (runners/pyunit.py): a Python
process that runs `python -m unittest` (or `coverage run -m unittest`) gets middle's unittest runner
(unittest_junit.py, copied beside this file), which writes a JUnit report, one per process, to
$MIDDLE_UNITTEST_JUNIT with `{pid}` replaced; any other Python process is left as it is. Then the
`sitecustomize` this one hides (a distribution's, a venv's) is imported, as without middle. With
$MIDDLE_PYTEST_RUNALL set, pytest loads middle's plugin that keeps it running past `-x`
(pytest_runall.py).

Standard library only, and loadable by any Python a wrapper starts (a tox env's, an old one):
`sys.orig_argv` (3.10+) is what tells `-m unittest`; an older Python writes no report, and the
wrapper's count of unittest runs then says the reports are incomplete (judged by its exit code).
"""

import os
import sys

_OPTS_WITH_VALUE = ("-W", "-X", "-Q")


def _runs_unittest(argv):  # type: ignore[no-untyped-def]
    """`python [options] -m unittest ...`, or a coverage run of it (`coverage run -m unittest`,
    `python -m coverage run -m unittest`): not a pytest whose marker option is `-m unittest`."""
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "-m" or (arg.startswith("-m") and len(arg) > 2):
            module = arg[2:] or (args.pop(0) if args else "")
            return module == "unittest" or (module == "coverage" and _coverage_runs_unittest(args))
        if arg in _OPTS_WITH_VALUE:
            args[:1] = []
        elif arg.startswith("-c") or arg == "-":
            return False
        elif not arg.startswith("-"):  # a script: `coverage` itself, or anything else
            return os.path.basename(arg).startswith("coverage") and _coverage_runs_unittest(args)
    return False


def _coverage_runs_unittest(args):  # type: ignore[no-untyped-def]
    if not args or args[0] != "run":
        return False
    return any(a == "-m" and b == "unittest" for a, b in zip(args, args[1:])) or "-munittest" in args


def _hook():  # type: ignore[no-untyped-def]
    template = os.environ.get("MIDDLE_UNITTEST_JUNIT")
    if not template or not _runs_unittest(getattr(sys, "orig_argv", None) or []):
        return
    import unittest.runner

    import middle_unittest_junit

    os.environ["MIDDLE_JUNIT_PATH"] = template.replace("{pid}", str(os.getpid()))
    # unittest.main takes its runner class from unittest.runner when none is given, as `-m unittest` does
    unittest.runner.TextTestRunner = middle_unittest_junit._Runner


def _hidden_sitecustomize():  # type: ignore[no-untyped-def]
    """Import the next `sitecustomize` on the path, the one Python would have imported."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved, mine = sys.path[:], sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        if mine is not None:
            sys.modules["sitecustomize"] = mine
    finally:
        sys.path[:] = saved


def _pytest_runs_all():  # type: ignore[no-untyped-def]
    """pytest, if this process runs it, loads middle's plugin that keeps it past `-x`
    (pytest_runall.py, beside this file as middle_pytest_runall.py)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if not os.environ.get("MIDDLE_PYTEST_RUNALL") or not os.path.isfile(os.path.join(here, "middle_pytest_runall.py")):
        return
    plugins = [p for p in os.environ.get("PYTEST_PLUGINS", "").split(",") if p.strip()]
    if "middle_pytest_runall" not in plugins:
        os.environ["PYTEST_PLUGINS"] = ",".join([*plugins, "middle_pytest_runall"])


try:
    _pytest_runs_all()
    _hook()
finally:
    _hidden_sitecustomize()
