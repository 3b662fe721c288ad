"""The kinds of fact a Hindsight bank holds (light: the CLI's choices need no store code)."""

KINDS = ("world", "experience", "observation")
