"""The check gate enumerated, its JavaScript and Ruby rows (tests/graph/gate_matrix.py has the
table and what each cell must be; the other rows are in test_gate_matrix.py): `node --test`,
jest, vitest, mocha, rspec, directly and behind npm test, make and rake.
"""

from __future__ import annotations

import pytest
from gate_matrix import JS_RUBY_ROWS, SCENARIOS, Matrix, check_cell

ROWS_HERE = JS_RUBY_ROWS


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    return Matrix(tmp_path_factory.mktemp("matrix"))


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("name", ROWS_HERE)
def test_the_gate_on_a_base_that_already_fails_one_test(matrix: Matrix, name: str, scenario: str) -> None:
    check_cell(matrix, name, scenario)


