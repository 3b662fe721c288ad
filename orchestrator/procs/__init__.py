"""The processes `middle` starts that could outlive it (a coding agent's turn, the middle agent's
model call through a CLI, a check command), started one way (`guarded.Guarded`) so none does, even
after kill -9: the kernel's parent-death signal, the group guard, and the orphan marker that the
`middle` taking a dead run over sweeps. Below every other folder: it imports only `tickets`."""
