"""Page through a project's docs over the API (500 a page, by the cursor) while others write:
pages, time, the slowest page, bytes, and any doc listed twice (by its whole id).

    python docs/bench-runs/teamsize/pager.py URL TOKEN PROJECT [oldest|newest]
"""

import collections
import sys
import time

import httpx


def main() -> None:
    url, token, project = sys.argv[1:4]
    sort = sys.argv[4] if len(sys.argv) > 4 else "oldest"
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120)
    seen: collections.Counter[str] = collections.Counter()
    cursor, pages, size, slowest, started = None, 0, 0, 0.0, time.perf_counter()
    while True:
        page = f"/api/projects/{project}/memory/docs?limit=500&sort={sort}" + (f"&cursor={cursor}" if cursor else "")
        asked = time.perf_counter()
        answer = client.get(page)
        slowest = max(slowest, time.perf_counter() - asked)
        answer.raise_for_status()
        body = answer.json()
        pages, size = pages + 1, size + len(answer.content)
        seen.update(doc.get("key", doc["id"]) for doc in body["docs"])
        cursor = body.get("next_cursor")
        if not cursor:
            break
    twice = [key for key, n in seen.items() if n > 1]
    print(f"sort={sort}: {pages} pages, {time.perf_counter() - started:.1f} s, slowest {slowest:.2f} s, "
          f"{size / 1e6:.1f} MB, {len(seen)} docs, listed twice: {twice or 'none'}, total now {body['total']}")


if __name__ == "__main__":
    main()
