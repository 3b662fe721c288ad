"""A database URL in a message never shows its password, wherever libpq would read it from."""

from __future__ import annotations

import pytest

from orchestrator.plugin_api import MemoryDatabase
from tickets.db import redact


@pytest.mark.parametrize("url,shown", [
    ("postgresql://bob:s3cret@db.example:5432/middle", "postgresql://bob:***@db.example:5432/middle"),
    ("postgresql://:s3cret@db/middle", "postgresql://:***@db/middle"),
    ("postgresql://bob@db/middle?password=s3cret&sslmode=require",
     "postgresql://bob@db/middle?password=***&sslmode=require"),
    ("postgresql://bob@db/middle", "postgresql://bob@db/middle"),
])
def test_the_password_is_replaced_in_the_address_and_the_query(url, shown):
    assert redact(url) == shown
    assert MemoryDatabase(url, "p").shown_url == shown  # the memory stores say it the same way
    assert "s3cret" not in MemoryDatabase(url, "p").where
