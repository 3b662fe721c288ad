"""The built-in memory backends; each registers through the same hook a third-party plugin uses."""
