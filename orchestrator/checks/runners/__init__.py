"""Test runners read test by test with no configuration: each module says which lines run it,
how the line (or its environment) asks for every test's outcome, and how that is read into the
report the verdict compares (cargo and go from their own output; node, jest, vitest and mocha
from a report middle asks for; `javascript` finds the runner behind `npm test`)."""
