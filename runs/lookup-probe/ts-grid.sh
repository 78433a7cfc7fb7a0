#!/bin/bash
# This project's own probe (npm run cli -- probe-lookup): the representations the PyTorch map
# found learnable, on both presets, plus the hard one on tiny for the record.
cd "$(dirname "$0")/../.."
run() { # name, flags...
  local name=$1; shift
  [ -s runs/lookup-probe/$name.jsonl ] && grep -q '"kind":"result"' runs/lookup-probe/$name.jsonl && return
  npm run --silent cli -- probe-lookup --out runs/lookup-probe/$name.jsonl "$@" > runs/lookup-probe/$name.log 2>&1
}
run small-s1-n2-last --preset small --size 1 --names 2 --layout last --steps 1500
run tiny-s1-n2-last --preset tiny --size 1 --names 2 --layout last --steps 1500
run small-s1-n1-last --preset small --size 1 --names 1 --layout last --steps 1500
run tiny-s1-n1-last --preset tiny --size 1 --names 1 --layout last --steps 1500
