#!/bin/sh
# Runs the fuzz campaign one target at a time (-jobs=1: the machine is shared), each for
# 10^6 executions or SECONDS_PER_TARGET seconds (default 1800), whichever comes first, seeding
# fuzz/corpus/<target>/ from the committed replay corpus and the repo's fixtures. All targets are
# built first, so editing the sources while the campaign runs does not rebuild it. Prints the
# executions, CPU seconds and crashes per target; the full log is logs/<target>.log, crash
# inputs land in artifacts/<target>/. Usage: [SECONDS_PER_TARGET=N] fuzz/campaign.sh [TARGET...]
set -eu
cd "$(dirname "$0")"
targets=${*:-"onnx_import trace_csv trace_pb accel_config idx cifar schedule sweep_plan npy checkpoint sweep_cells plot_csv"}
seconds=${SECONDS_PER_TARGET:-1800}
mkdir -p logs
cargo +nightly fuzz build -O --debug-assertions > logs/build.log 2>&1
bin=target/$(rustc -vV | sed -n 's/^host: //p')/release
for t in $targets; do
    mkdir -p "corpus/$t" "artifacts/$t"
    cp replay/"$t"/* "corpus/$t/" 2>/dev/null || true
    case $t in
        onnx_import) cp ../tests/fixtures/*.onnx "corpus/$t/" ;;
        accel_config) cp ../accel/configs/*.toml "corpus/$t/" ;;
        sweep_plan) cp ../examples/sweeps/*.toml "corpus/$t/" ;;
    esac
    # -jobs=1 runs one worker process that logs to fuzz-0.log.
    rm -f fuzz-0.log
    /usr/bin/time -f "%U %S" -o "logs/$t.time" "$bin/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" \
        -jobs=1 -workers=1 -runs=1000000 -max_total_time="$seconds" -rss_limit_mb=2048 \
        -timeout=10 -print_final_stats=1 > "logs/$t.log" 2>&1 || echo "$t: exit $?"
    cat fuzz-0.log >> "logs/$t.log" 2>/dev/null || true
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "logs/$t.log" | tail -1)
    cpu=$(tail -1 "logs/$t.time" 2>/dev/null | awk '{printf "%.0f", $1 + $2}')
    echo "$t: ${execs:-?} executions, ${cpu:-?} CPU seconds, $(find "artifacts/$t" -type f | wc -l) crash inputs"
done
