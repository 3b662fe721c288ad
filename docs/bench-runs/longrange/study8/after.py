"""A reading of the eighth try, made after its development-split decision (plan8.md). For each
long-range ticket of a history, the issue threads of the docs stored before it (the thread
collection as the bench's run built it, replayed offline: BM25 only, no vectors), the query's
best threads: are they right threads (holding one of the ticket's long-range relatives), how
big, and how many of the ticket's long-range relatives they hold (what the thread list can
bring at all). The sixth try's reading, for comparison: of the 179 docs its hop put into a first
five, 147 were no relatives (study6/after.py).
Usage: python docs/bench-runs/longrange/study8/after.py [../shared/data/tickets/datasette.json]"""
import dataclasses
import statistics
import sys

from backends.retrieval import thread_docs
from orchestrator.bench import ticket_data
from orchestrator.bench.replay import WINDOW, long_range, relevant_earlier, select

TOP = 5  # the query's best threads read


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/tickets/datasette.json"
    tickets = [dataclasses.replace(t, refs_in_doc=True)
               for t in select(ticket_data.load_ticket_file(path), None, 1500)]
    longs = long_range(relevant_earlier(tickets), WINDOW)
    docs = [t.completion_doc() for t in tickets]
    index = thread_docs.ThreadIndex()
    n_long = with_threads = first_right = any_right = 0
    rel_total = rel_threaded = rel_in_top = rel_in_first = 0
    first_sizes, first_share = [], []
    for pos, ticket in enumerate(tickets):
        if not longs[pos]:
            continue
        n_long += 1
        index.update(str(pos), dict(enumerate(docs[:pos])), code=True)
        threaded = {d for issue in index._members for d in index.members(issue)}
        best = index.threads(ticket.start_query(), TOP)
        rel = longs[pos]
        rel_total += len(rel)
        rel_threaded += len(rel & threaded)
        if not best:
            continue
        with_threads += 1
        members = [set(index.members(issue)) for issue, _ in best]
        first = members[0]
        first_sizes.append(len(first))
        first_share.append(len(first & rel) / len(first))
        first_right += bool(first & rel)
        any_right += any(m & rel for m in members)
        rel_in_first += len(first & rel)
        rel_in_top += len(rel & set().union(*members))
    print(f"long-range tickets {n_long}, with a matching thread {with_threads}")
    print(f"their best thread holds a long-range relative: {first_right} of {with_threads}; "
          f"one of the best {TOP} does: {any_right}")
    print(f"best thread's size: median {statistics.median(first_sizes)}, max {max(first_sizes)}; "
          f"share of its docs that are relatives: mean {statistics.mean(first_share):.3f}")
    print(f"long-range relatives {rel_total}: in some thread of 2+ docs {rel_threaded}, "
          f"in the best thread {rel_in_first}, in one of the best {TOP} {rel_in_top}")


if __name__ == "__main__":
    main()
