"""calc: a tiny sample package for the middle-agent demo."""
