#!/usr/bin/env python3
"""Regenerates accel/src/validation/dnnsim_cycles.csv by running DNNsim, the Stripes group's
cycle-level simulator, on the layers that file lists.

Needs: a DNNsim build (revision REVISION below: `cmake -H. -Bcmake-build-release
-DCMAKE_BUILD_TYPE=Release && cmake --build cmake-build-release --target all`, which also builds
its DRAMSim2), a cptsim binary (for the layer shapes: `cptsim inspect zoo:NAME --format csv`)
and numpy. The layers and their `act_bits` come from the existing CSV (the set-up; a cptsim test
checks them against the zoo); the cycle columns are recomputed. Writes the CSV to stdout:

    scripts/dnnsim-cycles.py --dnnsim /path/to/DNNsim --cptsim target/release/cptsim \\
        --work /tmp/dnnsim-work > accel/src/validation/dnnsim_cycles.csv

`--networks a,b` limits the run to some networks (the output then holds only those). A whole
run takes about half an hour of one core; bf-alexnet's fc1 needs about 4.5 GB of memory.
"""

import argparse
import csv
import io
import os
import subprocess
import sys

REVISION = "4748a6001ec5b69061e9e75db824008846c50e07"

HEADER = f"""\
# DNNsim's compute cycles per image for every ungrouped conv and linear layer of seven zoo
# networks, on DaDianNao (16-bit activations) and on Stripes (the layer's activation bits,
# `act_bits`). Regenerate with scripts/dnnsim-cycles.py (it writes this file).
#
# DNNsim (Isak Edo Vivancos and Andreas Moshovos' simulator of the Stripes group's
# accelerators): github.com/isakedo/DNNsim at revision
# {REVISION}, built as its README says.
# Set-up, one DNNsim network per zoo network (bf-alexnet: one per layer):
# - the layers of `cptsim inspect zoo:NAME --format csv` as a DNNsim CSV model (name, conv|fc,
#   stride, the padding that gives the zoo's output size), one image, traces of uniform random
#   values in [-1, 1) (DNNsim's DaDianNao and Stripes cycles do not read the values: Stripes
#   takes `act_bits` cycles per step, DaDianNao one);
# - precision.txt: activations `act_bits` of magnitude and no fraction, weights 16 and 0;
# - data_type Fixed, task Cycles, dataflow WindowFirstOutS, tiles 16, rows 16, lanes 16,
#   pe_width 16, columns 1 (DaDianNao) or 16 (Stripes), 1 GiB global buffers, DDR4_3200; the
#   `compute_cycles` column of DNNsim's result is taken (the cycles the array computes, memory
#   stalls excluded).
# `act_bits` are the `bf-` models' stated activation bits (zoo::bf_bits) and 8 for resnet20.
# bf-alexnet's two-group convs conv2, conv4 and conv5 are absent: DNNsim's grouped-layer path did
# not finish on them (with conv1 and conv3 it stopped with "DRAM waiting for a memory address not
# requested"; conv2 alone grew past 23 GB and was killed).
"""

COLUMNS = ["network", "layer", "act_bits", "dadiannao", "stripes"]

# Networks run one layer per DNNsim network (the whole network did not fit in memory).
PER_LAYER = {"bf-alexnet"}

ARCHS = [("DaDianNao", 1), ("Stripes", 16)]


def experiment(arch, columns):
    return f"""\
\texperiment {{
\t\tarchitecture: "{arch}"
\t\ttask: "Cycles"
\t\tdataflow: "WindowFirstOutS"
\t\tlanes: 16
\t\tcolumns: {columns}
\t\trows: 16
\t\ttiles: 16
\t\tpe_width: 16
\t\tcpu_clock_freq: "1GHz"
\t\tdram_conf: "DDR4_3200"
\t\tdram_size: "16GiB"
\t\tdram_start_act_address: 0x80000000
\t\tdram_start_wgt_address: 0x00000000
\t\tgbuffer_act_levels: 1
\t\tgbuffer_wgt_levels: 1
\t\tgbuffer_act_size: "1GiB"
\t\tgbuffer_wgt_size: "1GiB"
\t\tgbuffer_act_banks: 32
\t\tgbuffer_wgt_banks: 256
\t\tgbuffer_act_bank_width: 256
\t\tgbuffer_wgt_bank_width: 256
\t\tgbuffer_act_read_delay: 2
\t\tgbuffer_act_write_delay: 2
\t\tgbuffer_wgt_read_delay: 2
\t\tabuffer_rows: 2
\t\tabuffer_read_delay: 1
\t\twbuffer_rows: 2
\t\twbuffer_read_delay: 1
\t\tobuffer_rows: 2
\t\tobuffer_write_delay: 1
\t\tcomposer_inputs: 256
\t\tcomposer_delay: 1
\t\tppu_inputs: 16
\t\tppu_delay: 1
\t}}
"""


def batch_file(run):
    body = "".join(experiment(a, c) for a, c in ARCHS)
    return f'simulate {{\n\tnetwork: "{run}"\n\tmodel: "CSV"\n\tdata_type: "Fixed"\n{body}}}\n'


def pad_for(h, k, s, o, what):
    for p in range(k):
        if (h + 2 * p - k) // s + 1 == o:
            return p
    sys.exit(f"{what}: no padding gives {o} outputs from {h} with kernel {k}, stride {s}")


def dnnsim_name(layer):
    return layer.replace(".", "_")


def write_inputs(work, run, layers, bits):
    """DNNsim's models/RUN/{model.csv,precision.txt} and net_traces/RUN/*.npy."""
    import numpy as np

    os.makedirs(f"{work}/models/{run}", exist_ok=True)
    os.makedirs(f"{work}/net_traces/{run}", exist_ok=True)
    rng = np.random.default_rng(0)
    with open(f"{work}/models/{run}/model.csv", "w") as m:
        for r in layers:
            what = f"{run} {r['name']}"
            c, h, w = map(int, r["in_shape"].split("x"))
            k, h_o, _ = map(int, r["out_shape"].split("x"))
            kh, kw = map(int, r["kernel"].split("x"))
            s = int(r["stride"].split("x")[0])
            name = dnnsim_name(r["name"])
            if r["op"] == "Linear":
                m.write(f"{name},fc,1,0\n")
                act = rng.uniform(-1, 1, (1, c * h * w))
                wgt = rng.uniform(-1, 1, (k, c * h * w))
            else:
                p = pad_for(h, kh, s, h_o, what)
                m.write(f"{name},conv,{s},{p}\n")
                act = rng.uniform(-1, 1, (1, c, h, w))
                wgt = rng.uniform(-1, 1, (k, c, kh, kw))
            np.save(f"{work}/net_traces/{run}/wgt-{name}.npy", wgt.astype(np.float32))
            np.save(f"{work}/net_traces/{run}/act-{name}-0.npy", act.astype(np.float32))
    n = len(layers)
    with open(f"{work}/models/{run}/precision.txt", "w") as f:
        f.write("magnitude (+1 of the sign), fraction, wgt_magnitude, wgt_fraction\n")
        for row in (bits, [0] * n, [16] * n, [0] * n):
            f.write("".join(f"{b};" for b in row) + "\n")


def compute_cycles(work, run, arch):
    """Layer name → compute_cycles of sample 0 in DNNsim's result file for `arch`."""
    folder = f"{work}/results/{run}"
    files = [f for f in os.listdir(folder) if f.startswith(arch + "_")]
    if len(files) != 1:
        sys.exit(f"{folder}: expected one {arch} result file, found {files}")
    lines = open(f"{folder}/{files[0]}").read().split("\n")
    start = next((i for i, l in enumerate(lines) if l.startswith("Layer,Sample")), None)
    if start is None:
        sys.exit(f"{folder}/{files[0]}: no per-layer table")
    head = lines[start].split(",")
    col = head.index("compute_cycles")
    out = {}
    for line in lines[start + 1 :]:
        if not line or line.startswith("Layer"):
            break
        f = line.split(",")
        out[f[0]] = int(f[col])
    return out


def run_dnnsim(args, run):
    with open(f"{args.work}/batch-{run}", "w") as f:
        f.write(batch_file(run))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = open(f"{args.work}/log-{run}.txt", "w")
    print(f"DNNsim {run} ...", file=sys.stderr)
    done = subprocess.run(
        [f"{args.dnnsim}/DNNsim", f"batch-{run}"], cwd=args.work, env=env, stdout=log, stderr=log
    )
    if done.returncode != 0:
        sys.exit(f"DNNsim failed on {run} (see {args.work}/log-{run}.txt)")
    return {a: compute_cycles(args.work, run, a) for a, _ in ARCHS}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dnnsim", required=True, help="DNNsim source folder, built")
    ap.add_argument("--cptsim", required=True, help="cptsim binary")
    ap.add_argument("--work", required=True, help="scratch folder for DNNsim's inputs and results")
    ap.add_argument(
        "--layers",
        default=os.path.join(here, "../accel/src/validation/dnnsim_cycles.csv"),
        help="CSV whose network, layer and act_bits columns say what to run",
    )
    ap.add_argument("--networks", help="comma-separated subset of the networks")
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    dram = f"{args.work}/DRAMSim2"
    if not os.path.exists(dram):
        os.symlink(os.path.abspath(f"{args.dnnsim}/DRAMSim2"), dram)

    text = "".join(l for l in open(args.layers) if not l.startswith("#"))
    wanted = list(csv.DictReader(io.StringIO(text)))
    nets = list(dict.fromkeys(r["network"] for r in wanted))
    if args.networks:
        keep = args.networks.split(",")
        unknown = [n for n in keep if n not in nets]
        if unknown:
            sys.exit(f"--networks: {unknown} not in {args.layers} ({nets})")
        nets = [n for n in nets if n in keep]

    out = [HEADER, ",".join(COLUMNS) + "\n"]
    for net in nets:
        rows = [r for r in wanted if r["network"] == net]
        shapes = subprocess.run(
            [args.cptsim, "inspect", f"zoo:{net}", "--format", "csv"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        by_name = {r["name"]: r for r in csv.DictReader(io.StringIO(shapes))}
        missing = [r["layer"] for r in rows if r["layer"] not in by_name]
        if missing:
            sys.exit(f"zoo:{net} has no layers {missing}")
        layers = [by_name[r["layer"]] for r in rows]
        bits = [int(r["act_bits"]) for r in rows]
        groups = [[i] for i in range(len(rows))] if net in PER_LAYER else [list(range(len(rows)))]
        cycles = {}
        for g in groups:
            run = net if len(groups) == 1 else f"{net}-{layers[g[0]]['name']}"
            write_inputs(args.work, run, [layers[i] for i in g], [bits[i] for i in g])
            for arch, per_layer in run_dnnsim(args, run).items():
                cycles.setdefault(arch, {}).update(per_layer)
        for r in rows:
            key = dnnsim_name(r["layer"])
            d, s = cycles["DaDianNao"][key], cycles["Stripes"][key]
            out.append(f"{net},{r['layer']},{r['act_bits']},{d},{s}\n")
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()
