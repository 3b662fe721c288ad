"""A reading of the seventh try, made after its decision (plan7.md's rule said: not carried).
For each long-range ticket of the development split, the expansion its start query gets from the
docs stored before it (the table as the bench's run built it, replayed offline), and per
long-range relative: does it share a content word with the query, does it have an expansion
word; and how many stored docs have an expansion word (what else the expansion's list reaches).
Usage: python docs/bench-runs/longrange/study7/after.py [../shared/data/tickets/datasette.json]"""
import dataclasses
import statistics
import sys

from backends.retrieval import expansion
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
    for pos, ticket in enumerate(tickets):
        if not longs[pos]:
            continue
        n_long += 1
        table.update(str(pos), dict(enumerate(docs[:pos])))
        query = ticket.start_query()
        found = table.expand(query)
        expanded += bool(found.terms)
        own = expansion.words_of(query)
        terms = set(found.terms)
        reach.append(sum(1 for w in words[:pos] if w & terms))
        for p in longs[pos]:
            shares = bool(own & words[p])
            key = "shares a word" if shares else "shares none"
            rel[key] += 1
            if words[p] & terms:
                rel[key + ", has an expansion word"] += 1
        if len(examples) < 8 and found.terms:
            examples.append((ticket.title[:60], found.terms))
    print(f"long-range tickets {n_long}, with a non-empty expansion {expanded}")
    for key, n in rel.items():
        print(f"relatives: {key}: {n}")
    print(f"stored docs with an expansion word, per ticket: median {statistics.median(reach)}, "
          f"max {max(reach)} (of {len(docs)} at most)")
    for title, terms in examples:
        print(f"  {title!r} -> {', '.join(terms)}")


if __name__ == "__main__":
    main()
