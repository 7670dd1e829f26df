#!/usr/bin/env bash
# Exports the users' corpus and checks cptsim on it.
#   tests/python/run_corpus.sh [ci|all] [DIR]
# ci: the ≈ 15 files of corpus_models.CI_SUBSET, checked against the committed
# tests/python/corpus-results.json (a cell that passed there and fails now fails the run);
# all: every file, writing DIR/corpus-results.{md,json} (copy them over the committed ones to
# update the table). DIR defaults to ${TMPDIR:-/tmp}/cptsim-corpus; VENV (default /work/venv)
# must hold torch, torchvision, transformers, onnx, onnxruntime, onnxscript and numpy.
set -euo pipefail
cd "$(dirname "$0")/../.."
subset="${1:-ci}"
dir="${2:-${TMPDIR:-/tmp}/cptsim-corpus}"
venv="${VENV:-/work/venv}"
bin="${CARGO_TARGET_DIR:-target}/release/cptsim"
cargo build --release -p cptsim
"$venv/bin/python" tests/python/make_corpus.py --dir "$dir" --subset "$subset"
args=(--cptsim "$bin" --dir "$dir" --subset "$subset" --cache "$dir/rows"
      --markdown "$dir/corpus-results.md" --json "$dir/corpus-results.json")
if [ "$subset" = ci ]; then
    args+=(--baseline tests/python/corpus-results.json)
fi
"$venv/bin/python" tests/python/check_corpus.py "${args[@]}"
