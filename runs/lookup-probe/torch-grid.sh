#!/bin/bash
# The PyTorch map of which lookup representations learn (test/python/lookup_probe.py), small
# preset, 2,000 steps at most. Lane 1 or 2 (two lanes share the two cores). Earlier configs
# (s1-n2-last, s3-n2-last, s3-n2-first, s1-n2-last-filler8) were run by hand and stopped early.
cd "$(dirname "$0")/../.."
run() { # name, flags...
  local name=$1; shift
  [ -s runs/lookup-probe/torch-$name.jsonl ] && grep -q stepsToTarget runs/lookup-probe/torch-$name.jsonl && return
  /usr/bin/python3 test/python/lookup_probe.py --steps 2000 "$@" > runs/lookup-probe/torch-$name.jsonl
}
if [ "$1" = 1 ]; then
  run small-s3-n2-last-fixed --size 3 --names 2 --layout last --fixed
  run small-s3-n1-last --size 3 --names 1 --layout last
else
  run small-s3-n2-first-fixed --size 3 --names 2 --layout first --fixed
  run small-s2-n2-last --size 2 --names 2 --layout last
fi
