#!/bin/bash
# One person curating a project's memory from the CLI, N rounds of: add, search --explain, pin,
# edit, supersede, unpin, add and bulk forget; each command's exit code and time logged.
#   docs/bench-runs/teamsize/curate.sh PROJECT_DIR NAME ROUNDS > LOG
cd "$1" || exit 1
who=$2
run() { local t0 t1 out rc; t0=$(date +%s.%N); out=$("$@" 2>&1); rc=$?; t1=$(date +%s.%N)
  printf '%s rc=%s %.2fs :: %s\n' "$(date +%T)" $rc "$(echo "$t1-$t0" | bc)" "$*"
  if [ $rc != 0 ] || echo "$out" | grep -qi 'traceback\|locked\|error'; then echo "$out" | tail -5 | sed 's/^/    /'; fi; }
id_of() { echo -n "$1" | sha256sum | cut -c1-12; }
for i in $(seq 1 "$3"); do
  first="Rule $who-$i: login sessions in module $i use the cookie store $who$i."
  signed="Rule $who-$i: login sessions in module $i use the signed cookie store $who$i."
  run middle memory add "$first"
  run middle memory search "login session module $i" --explain
  run middle memory pin "$(id_of "$first")"
  run middle memory edit "$(id_of "$first")" --text "$signed"
  run middle memory supersede "$(id_of "$signed")" --with "Rule $who-$i: login sessions in module $i use JWT tokens $who$i, not cookies."
  run middle memory unpin "$(id_of "$signed")"
  run middle memory add "Scratch $who-$i: temporary note to forget."
  run middle memory delete --containing "Scratch $who-$i:" --yes
done
