"""The ticket domain: the ticket model, its SQLite store and ticket sources."""
