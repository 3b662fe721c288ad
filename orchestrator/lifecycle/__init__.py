"""A ticket run's life in the store: who may start it, the one owner of its end, and what to do next."""
