"""Coding-agent workers: the Claude Code headless driver and the worker protocol."""
