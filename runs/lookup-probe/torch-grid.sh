#!/bin/bash
# The PyTorch map of which lookup representations learn (test/python/lookup_probe.py), small preset.
cd "$(dirname "$0")/../.."
run() { # name, flags...
  local name=$1; shift
  [ -s runs/lookup-probe/torch-$name.jsonl ] && grep -q stepsToTarget runs/lookup-probe/torch-$name.jsonl && return
  /usr/bin/python3 test/python/lookup_probe.py --steps 3000 "$@" > runs/lookup-probe/torch-$name.jsonl
}
run small-s1-n2-last --size 1 --names 2 --layout last
run small-s3-n2-last --size 3 --names 2 --layout last
run small-s3-n2-first --size 3 --names 2 --layout first
run small-s3-n1-last --size 3 --names 1 --layout last
run small-s6-n2-last --size 6 --names 2 --layout last
run small-s6-n2-first --size 6 --names 2 --layout first
run small-s3-n1-first --size 3 --names 1 --layout first
run small-s3-n2-last-mix --size 3 --names 2 --layout last --mix
run small-s6-n2-last-mix --size 6 --names 2 --layout last --mix
