"""Tests for the ticket model: statuses, safe ids and Ticket validation."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from orchestrator.errors import ConfigError, TicketError
from tickets.model import (
    RunStatus,
    Ticket,
    TicketStatus,
    TicketValidationError,
    normalize_timestamp,
    validate_project_id,
    validate_ticket_id,
)


def make(**overrides):
    data = {"id": "t1", "project_id": "proj", "title": "Do it", "project_path": "/tmp/proj"}
    data.update(overrides)
    return Ticket(**data)


def test_statuses_are_the_ticket_states():
    assert [s.value for s in TicketStatus] == ["pending", "running", "complete", "failed", "interrupted",
                                               "reverted", "merged", "conflict", "discarded"]
    assert TicketStatus("complete") is TicketStatus.COMPLETE
    assert TicketStatus.FAILED == "failed"  # a str enum compares equal to its value


def test_run_statuses():
    assert {s.value for s in RunStatus} == {"running", "complete", "failed", "interrupted"}


@pytest.mark.parametrize("pid", ["a", "my-app", "My_App.v2", "x" * 100, "0", "a..b"])
def test_safe_project_ids_pass_unchanged(pid):
    assert validate_project_id(pid) == pid


@pytest.mark.parametrize(
    "pid", ["", "../x", "..", ".", ".hidden", "a/b", "a\\b", "/abs", "a\x00b", "x" * 101,
            "has space", "tab\t", "é", "a:b"])
def test_unsafe_project_ids_raise_config_error_naming_the_id(pid):
    with pytest.raises(ConfigError) as info:
        validate_project_id(pid)
    msg = str(info.value)
    assert f"project id '{pid}'" in msg
    assert "letters, digits, '.', '_' and '-'" in msg


def test_non_string_project_id_is_refused():
    with pytest.raises(ConfigError, match="not text"):
        validate_project_id(42)  # type: ignore[arg-type]


def test_ticket_id_follows_the_same_rule_but_raises_ticket_error():
    assert validate_ticket_id("T-1.2_b") == "T-1.2_b"
    with pytest.raises(TicketError, match="ticket id '../x'"):
        validate_ticket_id("../x")


def test_ticket_defaults():
    t = make()
    assert t.status is TicketStatus.PENDING
    assert t.description == ""
    assert t.fields == {}
    assert t.source is None and t.status_reason is None
    created = datetime.fromisoformat(t.created_at)
    assert created.utcoffset().total_seconds() == 0
    assert datetime.fromisoformat(t.updated_at) >= created


def test_title_is_stripped_and_must_not_be_empty():
    assert make(title="  Fix it \n").title == "Fix it"
    with pytest.raises(TicketValidationError, match="title is empty"):
        make(title="   ")


@pytest.mark.parametrize("field,value", [("id", "a/b"), ("id", ""), ("project_id", "../x"),
                                         ("project_id", ".git")])
def test_unsafe_ids_are_invalid(field, value):
    with pytest.raises(TicketValidationError, match="holds|is empty|starts with"):
        make(**{field: value})


def test_project_path_must_be_absolute():
    with pytest.raises(TicketValidationError, match="not absolute"):
        make(project_path="relative/dir")


def test_fields_must_be_json_able():
    assert make(fields={"labels": ["a", "b"], "n": 1, "m": {"x": None}}).fields["n"] == 1
    with pytest.raises(TicketValidationError, match="JSON-able"):
        make(fields={"when": datetime.now()})


def test_unknown_attributes_are_refused():
    with pytest.raises(TypeError, match="priority"):
        make(priority="high")
    with pytest.raises(AttributeError, match="priority"):
        make().priority = "high"


def test_every_problem_is_reported_at_once_as_a_ticket_error():
    with pytest.raises(TicketValidationError) as caught:
        make(id="a/b", title=" ", project_path="rel", status="done", depends_on="t2")
    problems = caught.value.problems
    assert len(problems) == 5, problems
    assert isinstance(caught.value, TicketError)  # the CLI prints it as one `error:` line
    assert str(caught.value).startswith("invalid ticket: ")


def test_values_of_the_wrong_type_are_refused_not_coerced():
    for field, value in [("title", 3), ("description", None), ("fields", []), ("source", 1),
                         ("depends_on", ("t2", 3))]:
        with pytest.raises(TicketValidationError):
            make(**{field: value})
    assert make(depends_on=("t2", "t3", "t2")).depends_on == ["t2", "t3"]
    assert make(status="failed").status is TicketStatus.FAILED


def test_replace_checks_the_copy_and_keeps_the_original():
    t = make()
    copy = t.replace(status="complete", status_reason="done")
    assert copy.status is TicketStatus.COMPLETE and t.status is TicketStatus.PENDING
    assert copy.created_at == t.created_at
    with pytest.raises(TicketValidationError, match="title is empty"):
        t.replace(title="")


def test_to_dict_is_json_data_that_builds_the_same_ticket():
    import json

    t = make(fields={"labels": ["a"]}, depends_on=["t0"], status="merged")
    data = t.to_dict()
    assert data["status"] == "merged"
    assert json.loads(json.dumps(data)) == data
    assert Ticket(**data) == t
    data["fields"]["labels"].append("b")  # a copy: the ticket does not change
    assert t.fields == {"labels": ["a"]}


def test_assignment_is_validated():
    t = make()
    with pytest.raises(TicketValidationError):
        t.project_id = "../escape"
    assert t.project_id == "proj"
    t.title = "  Renamed "
    assert t.title == "Renamed"


def test_timestamps_are_normalized_to_utc():
    t = make(created_at="2025-01-31T14:00:00+02:00", updated_at="2025-01-31T12:00:00")
    assert t.created_at == "2025-01-31T12:00:00.000000+00:00"
    assert t.updated_at == "2025-01-31T12:00:00.000000+00:00"
    with pytest.raises(TicketValidationError, match="not ISO-8601"):
        make(created_at="yesterday")


def test_normalized_timestamps_sort_as_text_in_time_order():
    stamps = ["2025-01-01T00:00:00.5+00:00", "2024-12-31T23:59:59-01:00", "2025-01-01T00:00:00Z"]
    normalized = sorted(normalize_timestamp(s) for s in stamps)
    parsed = [datetime.fromisoformat(s) for s in normalized]
    assert parsed == sorted(parsed)
    assert all(p.tzinfo == timezone.utc for p in parsed)
