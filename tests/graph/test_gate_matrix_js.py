"""The check gate enumerated, its JavaScript and Ruby rows (tests/graph/gate_matrix.py has the
table and what each cell must be; the other rows are in test_gate_matrix.py): `node --test`,
jest, vitest, mocha, uvu, rspec, directly and behind npm test, make and rake; what uvu's wrapper
records of hooks, `.only` and same-named tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gate_matrix import JS_RUBY_ROWS, ROW, SCENARIOS, Matrix, _link_packages, _missing, check_cell

from orchestrator.checks.runner import run_check

ROWS_HERE = JS_RUBY_ROWS


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    return Matrix(tmp_path_factory.mktemp("matrix"))


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", ROWS_HERE)
def test_the_gate_on_a_base_that_already_fails_one_test(matrix: Matrix, name: str, scenario: str) -> None:
    check_cell(matrix, name, scenario)




UVU_HOOKS = """\
import { test, suite } from 'uvu';
import * as assert from 'uvu/assert';

const hooks = suite('hooks');
hooks.before.each((ctx) => { if (ctx.__test__ === 'setup fails') throw new Error('setup'); });
hooks.after.each((ctx) => { if (ctx.__test__ === 'teardown fails') throw new Error('teardown'); });
hooks('passes', () => {});
hooks('setup fails', () => {});
hooks('teardown fails', () => {});
hooks.run();

const only = suite('only');
only('not chosen', () => { throw new Error('never runs'); });
only.only('chosen', () => {});
only.run();

test('same', () => {});
test('same', () => { assert.ok(false); });
test.skip('later', () => {});
test.run();
"""


def test_uvu_s_wrapper_records_what_uvu_ran(tmp_path: Path) -> None:
    """A test whose before.each or after.each threw failed (uvu says so too, though its handler
    passed or never ran); `.only` leaves the others skipped; same-named tests are two."""
    row = ROW["uvu"]
    if (why := _missing(row)) is not None:
        pytest.skip(why)
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "hooks.test.mjs").write_text(UVU_HOOKS, encoding="utf-8")
    _link_packages(row, tmp_path)
    result = run_check("uvu test", tmp_path, timeout_s=120)
    file = "test/hooks.test.mjs::"
    assert result.failing == [f"{file}hooks > setup fails", f"{file}hooks > teardown fails", f"{file}same (2)"], \
        result.tail
    assert sorted(result.ran or []) == sorted(f"{file}{t}" for t in ("hooks > passes", "hooks > setup fails",
                                                                     "hooks > teardown fails", "only > chosen",
                                                                     "same", "same (2)")), result.tail
    assert sorted(result.skipped or []) == [f"{file}later", f"{file}only > not chosen"], result.tail
