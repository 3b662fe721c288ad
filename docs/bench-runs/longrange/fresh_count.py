"""Count a --repo history's scored and long-range tickets from its labels alone (no backend run):
how the fresh held-out histories were chosen (run-fresh.sh). Usage: python fresh_count.py REPO..."""
import sys
from pathlib import Path

from orchestrator.bench import ticket_data
from orchestrator.bench.replay import long_range, relevant_earlier

for name in sys.argv[1:]:
    history = ticket_data.load_git_repo(Path(name))
    tickets = history.tickets
    if len(tickets) > 2000:  # the rule: a history over 2,000 commits is replayed as its newest 1,500
        tickets = tickets[-1500:]
    relevant = relevant_earlier(tickets)
    longs = long_range(relevant, 20)
    print(name, len(history.tickets), "replayed", len(tickets), "scored", sum(1 for r in relevant if r),
          "long", sum(1 for found in longs if found))
