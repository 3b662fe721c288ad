"""The `middle` command: its commands by area, terminal output, and the context every command gets."""
