#!/usr/bin/env bash
# Regenerates the book's figures (docs/src/figures/*.png) with the built binary: the tutorial's
# runs in a scratch checkout-like directory (the datasets from ../shared/data or
# $CPTSIM_DATA_DIR), and the studies' figures from studies/*/results.csv.
# Usage: docs/make-figures.sh   (after `cargo build --release -p cptsim`)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cptsim="${CARGO_TARGET_DIR:-$root/target}/release/cptsim"
data="${CPTSIM_DATA_DIR:-$root/../shared/data}"
out="$root/docs/src/figures"
size=(--width 720 --height 450)
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/repo" "$scratch/shared" "$out"
ln -s "$root/examples" "$scratch/repo/examples"
ln -s "$(cd "$data" && pwd)" "$scratch/shared/data"
cd "$scratch/repo"

fm=fashion-mnist:../shared/data/fashion-mnist
"$cptsim" plot schedule --schedule static,cosine --bits 3:8 --grad-bits 8 --cycles 4 --iters 400 \
    "${size[@]}" -o "$out/tutorial-schedule.png"
"$cptsim" train --model zoo:lenet5 --data "$fm" --schedule static --bits 8 --grad-bits 8 \
    --iters 400 --lr 0.05 --eval-every 100 --out runs/static 2>/dev/null >/dev/null
"$cptsim" train --model zoo:lenet5 --data "$fm" --schedule cosine --bits 3:8 --cycles 4 --grad-bits 8 \
    --iters 400 --lr 0.05 --eval-every 100 --out runs/cpt 2>/dev/null >/dev/null
"$cptsim" plot curves runs/static runs/cpt "${size[@]}" -o "$out/tutorial-curves.png"
"$cptsim" plot trace runs/cpt/trace.csv --model zoo:lenet5 "${size[@]}" -o "$out/tutorial-bits.png"
"$cptsim" sweep run examples/sweeps/quickstart-fmnist-lenet5.toml 2>/dev/null >/dev/null
"$cptsim" plot pareto runs/quickstart/results.csv "${size[@]}" -o "$out/tutorial-pareto.png"

"$cptsim" plot schedule --schedule cosine,cosine-triangular,exp-triangular-v,demon --bits 3:8 \
    --grad-bits 8 --cycles 8 --iters 64000 "${size[@]}" -o "$out/guide-schedules.png"
"$cptsim" run --model zoo:resnet20 --schedule cosine --accel zc706 --report report >/dev/null 2>&1
"$cptsim" plot breakdown report --accel zc706 "${size[@]}" -o "$out/guide-breakdown.png"

studies="$root/studies"
"$cptsim" plot pareto "$studies/wholecycles-fmnist-resnet20/results.csv" --by schedule \
    "${size[@]}" -o "$out/studies-wholecycles-resnet20.png"
"$cptsim" plot pareto "$studies/accuracy-fmnist-resnet20/results.csv" --by policy \
    "${size[@]}" -o "$out/studies-accuracy.png"
"$cptsim" plot pareto "$studies/critical-period-fmnist-resnet20/results.csv" --x latency \
    --by schedule "${size[@]}" -o "$out/studies-critical-period.png"
"$cptsim" plot accumulator "$studies/accumulator-fmnist-resnet20/results.csv" "${size[@]}" \
    -o "$out/studies-accumulator.png"
ls -l "$out"
