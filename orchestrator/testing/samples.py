"""Sample docs for backend tests: short distinct docs, a huge doc, tricky Unicode."""

from __future__ import annotations

import random

_FIXES = ["adding a retry", "pinning the version", "escaping the input", "closing the handle",
          "raising the timeout", "sorting the keys", "caching the token", "splitting the query"]
_THINGS = ["payment webhook", "login form", "csv export", "search index", "upload queue",
           "billing report", "cache layer", "config parser", "cron scheduler", "email sender"]

UNICODE_DOCS = [
    "Deploy fixed 🚀🔥 for the 👩‍💻 team after the 🇯🇵 locale crash",
    "東京のサーバーで設定ファイルの読み込みエラーを修正した。中文测试：数据库迁移完成",
    "תוקן באג בהתחברות למערכת; مرحبا بالعالم: تم إصلاح الخطأ",
    "Combining marks stay as given: e\u0301 (decomposed) vs \u00e9 (composed), "
    "Z\u0351\u0334a\u0336",
    "Mixed scripts: naïve façade 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 Ελληνικά кириллица \u200f rtl-mark \u200d zwj",
]


def sample_doc(i: int, tag: str = "doc") -> str:
    """A short, distinct doc: its unique token `<tag><i>` plus a varied sentence."""
    return (f"Ticket {tag}{i}: fixed the {_THINGS[i % len(_THINGS)]} in module_{tag}_{i} "
            f"by {_FIXES[(i // len(_THINGS)) % len(_FIXES)]}.")


def huge_doc(chars: int) -> str:
    """About `chars` characters of varied prose behind a recognisable first sentence."""
    rng = random.Random(1234)
    vocab = [f"{w}{n}" for w in ("alpha", "bravo", "carrot", "delta", "ember") for n in range(60)]
    head = "Huge design note zqhugemarker: storage layer explained at length.\n"
    body: list[str] = []
    size = len(head)
    while size < chars:
        line = " ".join(rng.choice(vocab) for _ in range(12)) + ".\n"
        body.append(line)
        size += len(line)
    return head + "".join(body)
