#!/usr/bin/env bash
# Runs needle's public homework tests (a clone of github.com/dlsyscourse/hwN) against quill,
# with only the import mapped: `needle` is quill (shim/), and the apps a student writes
# (simple_ml.py, mlp_resnet.py, models.py) come from quill.apps (apps/, ahead of the clone's
# skeletons on the path). The test files are not part of quill; see docs/PYTHON.md.
#
#   scripts/needle-hw/run.sh PATH/TO/hw2 [pytest args...]
#
# Needs quill built into the Python that runs it (README), plus pytest, numdifftools (hw1)
# and torch (hw4). MNIST tests read PATH/TO/hwN/data/*.gz: link data/mnist there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
hw="${1:?usage: run.sh PATH/TO/hwN [pytest args]}"
shift
python="${PYTHON:-python3}"
cd "$hw"
if [ ! -e data/train-images-idx3-ubyte.gz ] && [ ! -e data/mnist ]; then
  echo "note: no MNIST under $hw/data; link it: ln -s $here/../../data/mnist/*.gz $hw/data/" >&2
fi
PYTHONPATH="$here/shim:$here/apps:python:${PYTHONPATH:-}" \
  exec "$python" -m pytest -p no:cacheprovider tests "$@"
