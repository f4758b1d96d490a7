#!/usr/bin/env bash
# The reliability suite (issue 48): hostile and careless input, each case asserting the
# specific error or the preserved data. CI runs every one of these files inside
# scripts/test-all.sh (they are ordinary cargo and pytest tests); this script reruns just them,
# e.g. after touching error paths, and prints how long they took (budget: 5 minutes on 2 cores).
#   - Rust: impossible allocations are OutOfMemory (alloc_errors), module arguments
#     (nn_arguments), NumPy 2's rules for floor division, powers, out-of-range writes and
#     read-only broadcast views (numpy_semantics, numpy_floor_divide), no panic on an error value in library code (no_panic_on_errors),
#     crafted pickles and label checks (data_pickle_hostile, data_hostile_files), checkpoint
#     mutants and the atomic writer (io_checkpoint), CLI flags (train_flags), checkpoint
#     mutants through `quill train --resume` (train_checkpoint), path collisions and a
#     kill -9 during saves loop (train_outputs).
#   - Python (needs the package built into .py-venv, as test-all.sh does): bad calls and
#     impossible sizes in a child interpreter that must survive (test_errors), argument rules
#     (test_arguments), crafted pickles that must run nothing (test_data_hostile), and the
#     seeded fuzz of view chains and op arguments against NumPy (test_fuzz_numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
cargo test -p quill --test alloc_errors --test nn_arguments --test data_pickle_hostile \
    --test data_hostile_files --test io_checkpoint --test numpy_semantics
cargo test -p quill-core --test numpy_floor_divide
cargo test -p quill-test-support --test no_panic_on_errors
cargo test -p quill-cli --test train_flags --test train_checkpoint --test train_outputs
py_tests=(test_errors.py test_arguments.py test_data_hostile.py test_fuzz_numpy.py)
.py-venv/bin/python -m pytest -q "${py_tests[@]/#/crates/quill-py/tests/}"
echo "reliability suite: $((SECONDS - start)) s"
