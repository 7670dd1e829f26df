#!/usr/bin/env bash
# Peer comparison: cptsim vs PyTorch fp32 / fake-quant 8/8 and onnxruntime, one thread
# each, interleaved. Usage: benches/peers/run.sh [shapes] [PYTHON] — a Python with torch, onnx and
# onnxruntime; without one a venv is created from PyPI under $PEERS_VENV (default
# target/peers-venv). Skips (exit 0, printed reason) when the peers cannot be installed.
# With `shapes`, runs shapes.py instead: cptsim's GEMM on ResNet-20's short shapes against MLAS,
# MKL and oneDNN (ROUNDS, and SECS of CPU time per shape, default 0.3).
# ROUNDS and STEPS (default 3 and 3) set the length; RESNET50_BATCH (default 16; 0 skips) the
# ResNet-50 eval comparison's batch; RESNET18_BATCH (default 0: skip) adds a
# ResNet-18 eval comparison, LSTM_BATCH, TRANSFORMER_BATCH and GRU_BATCH (default 20 each; 0
# skips one) the language models' training ones. FAMILIES (default none; `all` for every one
# peers.py lists) adds eval comparisons of torchvision models at batch 16 on FAMILY_SIZE images
# (default 224); TRAIN_FAMILIES (default none; `all`) adds fp32 and 8/8 training comparisons of
# other architectures (peers.py --help lists them) at TRAIN_BATCH (default 32); EVAL_FAMILIES
# (default none; `all`) adds eval comparisons of those models against onnxruntime at batch 16;
# ONLY_FAMILIES=1 leaves out the CIFAR ResNet rows.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
script=peers
if [[ "${1:-}" == shapes ]]; then
    script=shapes
    shift
fi
py="${1:-}"
if [[ -z "$py" ]]; then
    venv="${PEERS_VENV:-$root/target/peers-venv}"
    if [[ ! -x "$venv/bin/python" ]]; then
        python3 -m venv "$venv" || { echo "SKIPPED: cannot create a venv at $venv"; exit 0; }
    fi
    if ! "$venv/bin/python" -c "import torch, onnx, onnxruntime, numpy" 2>/dev/null; then
        # The CPU-only wheel index first (small); PyPI's default build (with CUDA libraries,
        # ≈ 5 GB) when that index cannot be reached.
        { "$venv/bin/pip" install --quiet --index-url https://download.pytorch.org/whl/cpu torch \
            || "$venv/bin/pip" install --quiet torch; } \
            && "$venv/bin/pip" install --quiet onnx onnxruntime numpy torchvision transformers \
            || { echo "SKIPPED: cannot install torch/onnx/onnxruntime from the package index"; exit 0; }
    fi
    py="$venv/bin/python"
fi
if ! "$py" -c "import torch, onnx, onnxruntime, numpy" 2>/dev/null; then
    echo "SKIPPED: $py lacks torch, onnx, onnxruntime or numpy"
    exit 0
fi
(cd "$root" && cargo build --release -p cptsim --quiet)
if [[ $script == shapes ]]; then
    cd "$root/benches/peers"
    exec "$py" shapes.py --cptsim "$root/target/release/cptsim" --rounds "${ROUNDS:-3}" \
        --secs "${SECS:-0.3}"
fi
exec "$py" "$root/benches/peers/peers.py" --cptsim "$root/target/release/cptsim" \
    --rounds "${ROUNDS:-3}" --steps "${STEPS:-3}" --resnet50-batch "${RESNET50_BATCH:-16}" --resnet18-batch "${RESNET18_BATCH:-0}" \
    --lstm-batch "${LSTM_BATCH:-20}" --transformer-batch "${TRANSFORMER_BATCH:-20}" \
    --gru-batch "${GRU_BATCH:-20}" --families "${FAMILIES:-}" --family-size "${FAMILY_SIZE:-224}" \
    --train-families "${TRAIN_FAMILIES:-}" --train-batch "${TRAIN_BATCH:-32}" \
    --eval-families "${EVAL_FAMILIES:-}" \
    ${ONLY_FAMILIES:+--only-families}
