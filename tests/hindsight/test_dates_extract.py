"""Date parsing (absolute, relative, query ranges, bad dates) and the offline fact extractor."""

from __future__ import annotations

from hindsight_helpers import ts

from backends.hindsight import dates, extract

REF = ts("2023-05-08")  # a Monday


def days(text: str) -> list[tuple[str, str]]:
    return [(dates.iso_day(s.start), dates.iso_day(s.end - 1)) for s in dates.find_spans(text, REF)]


def test_absolute_dates_in_their_usual_shapes():
    assert days("shipped on 3 June 2023") == [("3 June 2023", "3 June 2023")]
    assert days("released May 7, 2023.") == [("7 May 2023", "7 May 2023")]
    assert days("the 2023-04-30 outage") == [("30 April 2023", "30 April 2023")]
    assert days("planned for June 2023") == [("1 June 2023", "30 June 2023")]
    assert days("we started in 2021") == [("1 January 2021", "31 December 2021")]


def test_relative_dates_resolve_against_the_reference_time():
    assert days("I went there yesterday") == [("7 May 2023", "7 May 2023")]
    assert days("last week we argued") == [("1 May 2023", "7 May 2023")]
    assert days("two weeks ago") == [("24 April 2023", "30 April 2023")]
    assert days("last Friday") == [("5 May 2023", "5 May 2023")]
    assert days("next month") == [("1 June 2023", "30 June 2023")]
    assert days("in June") == [("1 June 2022", "30 June 2022")]  # memories are of the past


def test_dates_that_do_not_parse_are_skipped_not_errors():
    assert days("on 31 February 2023") == [("1 February 2023", "28 February 2023")]  # month kept
    assert days("2023-13-45 and 99 Smarch 2023 and at 5 pm") == []
    assert dates.parse_iso("not a date") is None and dates.parse_iso(None) is None


def test_query_ranges_anchors_and_when_questions():
    q = dates.parse_query("What did we fix last week?", REF)
    assert (dates.iso_day(q.span.start), dates.iso_day(q.span.end - 1)) == ("1 May 2023", "7 May 2023")
    q = dates.parse_query("What happened in May 2023?", REF)
    assert dates.iso_day(q.span.start) == "1 May 2023"
    q = dates.parse_query("What broke after 3 June 2023?", REF)
    assert dates.iso_day(q.span.start) == "4 June 2023" and q.span.end == float("inf")
    q = dates.parse_query("What did Mel paint before the trip?", REF)
    assert q.span is None and (q.anchor, q.anchor_side) == ("the trip", "before")
    assert dates.parse_query("When did Caroline go to the group?", REF).asks_when
    assert not dates.parse_query("Where did Caroline go?", REF).asks_when


def test_sentence_facts_keep_the_speaker_entities_dates_and_kinds():
    facts = extract.extract("Caroline: Hey Mel! Good to see you! I went to a LGBTQ support "
                            "group yesterday and it was so powerful.", REF, 60)
    assert [f.text for f in facts] == [
        "Caroline: Hey Mel! Good to see you!",
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."]
    assert facts[0].entities == ["Caroline", "Mel"]
    assert facts[1].kind == "experience" and "LGBTQ" in facts[1].entities
    assert dates.iso_day(facts[1].start) == "7 May 2023" and facts[0].start is None


def test_ticket_docs_code_entities_and_causal_cues():
    facts = extract.extract("Ticket: Add OAuth login. The CI broke on requests 2.32. So we pinned "
                            "it in auth/oauth.py and the config_loader module.", REF, 60)
    assert all(f.text.startswith("Ticket Add OAuth login: ") for f in facts)
    assert "OAuth" in facts[0].entities
    assert {"auth/oauth.py", "config_loader"} <= set(facts[1].entities)
    assert facts[1].caused_by == [0]


def test_memory_text_is_stripped_and_huge_docs_are_grouped():
    text = "Memories invoked:\nTicket: old thing. done.\n\nRun the migration now, then report back."
    assert extract.strip_memory_text(text) == "Run the migration now, then report back."
    huge = " ".join(f"Sentence number {i} talks about widget{i} here." for i in range(1000))
    facts = extract.extract(huge, REF, 50)
    assert len(facts) == 50 and "widget0" in facts[0].text and "widget999" in facts[-1].text
