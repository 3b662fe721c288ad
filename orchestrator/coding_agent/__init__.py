"""Coding agents: the Claude Code headless driver and the coding-agent protocol."""
