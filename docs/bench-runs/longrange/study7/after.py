"""A reading of the seventh try, made after its decision (plan7.md's rule said: not carried).
For each long-range ticket of the development split, the expansion its start query gets from the
docs stored before it (the table as the bench's run built it, replayed offline), and per
long-range relative: does it share a content word with the query, does it have an expansion
word; and how many stored docs have an expansion word (what else the expansion's list reaches).
Usage: python docs/bench-runs/longrange/study7/after.py [../shared/data/tickets/datasette.json]"""
import dataclasses
import sqlite3
import statistics
import sys

from backends.retrieval import bm25, expansion
from orchestrator.bench import ticket_data
from orchestrator.bench.replay import WINDOW, long_range, relevant_earlier, select


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/tickets/datasette.json"
    tickets = [dataclasses.replace(t, refs_in_doc=True)
               for t in select(ticket_data.load_ticket_file(path), None, 1500)]
    longs = long_range(relevant_earlier(tickets), WINDOW)
    docs = [t.completion_doc() for t in tickets]
    words = [expansion.words_of(d) for d in docs]
    table = expansion.Associations()
    n_long = expanded = 0
    rel = {"shares a word": 0, "shares none": 0, "shares none, has an expansion word": 0,
           "shares a word, has an expansion word": 0}
    reach, examples = [], []
    # The expansion's own BM25 list, as the store's (FTS5, Porter, code terms), over the docs
    # stored before each ticket: where the relatives sharing no query word land in it.
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE fts USING fts5(text, tokenize='{bm25.FTS_TOKENIZE}')")
    stored = 0
    places = {"top 5": 0, "6 to 75": 0, "below 75 or absent": 0}
    for pos, ticket in enumerate(tickets):
        if not longs[pos]:
            continue
        for i in range(stored, pos):
            conn.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (i + 1, bm25.fts_text(docs[i])))
        stored = pos
        n_long += 1
        table.update(str(pos), dict(enumerate(docs[:pos])))
        query = ticket.start_query()
        found = table.expand(query)
        expanded += bool(found.terms)
        own = expansion.words_of(query)
        terms = set(found.terms)
        reach.append(sum(1 for w in words[:pos] if w & terms))
        listed = [rowid - 1 for rowid, _ in bm25.search(conn, "fts", found.query(), 75, True)] if terms else []
        for p in longs[pos]:
            shares = bool(own & words[p])
            key = "shares a word" if shares else "shares none"
            rel[key] += 1
            if words[p] & terms:
                rel[key + ", has an expansion word"] += 1
            if not shares:
                at = listed.index(p) if p in listed else None
                places["top 5" if at is not None and at < 5 else
                       "6 to 75" if at is not None else "below 75 or absent"] += 1
        if len(examples) < 8 and found.terms:
            examples.append((ticket.title[:60], found.terms))
    print(f"long-range tickets {n_long}, with a non-empty expansion {expanded}")
    for key, n in rel.items():
        print(f"relatives: {key}: {n}")
    for key, n in places.items():
        print(f"relatives sharing no query word, in the expansion's BM25 list: {key}: {n}")
    print(f"stored docs with an expansion word, per ticket: median {statistics.median(reach)}, "
          f"max {max(reach)} (of {len(docs)} at most)")
    for title, terms in examples:
        print(f"  {title!r} -> {', '.join(terms)}")


if __name__ == "__main__":
    main()
