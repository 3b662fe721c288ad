"""Running tickets: batches, the one owner of a run's end, checkpoints, next-step advice, and one machine of a fleet."""
