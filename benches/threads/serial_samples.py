#!/usr/bin/env python3
"""Which parts of a multi-threaded `cptsim bench train` step run serially.

Record and convert (studies or other load paused):

    perf record -F 300 --call-graph dwarf,16384 -o step.data \
        target/release/cptsim bench train --model zoo:resnet20 --threads 2 --steps 10 --shape-secs 0
    perf script -i step.data -F tid,time,ip,sym > step.txt
    python3 benches/threads/serial_samples.py step.txt

A sample of the thread that runs the step counts as serial when its stack has no rayon frame
between the leaf and `train_steps`: the other threads could only wait meanwhile. Prints, for
the timed steps (the time while every thread has samples), each thread's busy share, the serial
share of the step thread and its serial samples by their three innermost cptsim frames.
"""
import collections
import re
import sys

PARALLEL = re.compile(r"rayon::iter|rayon_core::join|bridge_producer|in_worker|plumbing")
ENGINE = re.compile(r"cptsim_(kernels|nn|train|bench)\b")


def samples(path):
    """(tid, time, frames innermost first) per sample of `perf script -F tid,time,ip,sym`."""
    head, frames = None, []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            if not line[0].isspace():
                if head:
                    yield head[0], head[1], frames
                p = line.split()
                if len(p) < 2:
                    sys.exit(f"{path}: expected `perf script -F tid,time,ip,sym` output, got {line!r}")
                head, frames = (int(p[0]), float(p[1].rstrip(":"))), []
            else:
                p = line.split(None, 1)
                if len(p) > 1:
                    frames.append(p[1].strip())
    if head:
        yield head[0], head[1], frames


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = list(samples(sys.argv[1]))
    if not rows:
        sys.exit(f"no samples in {sys.argv[1]}")
    times = collections.defaultdict(list)
    for tid, t, _ in rows:
        times[tid].append(t)
    threads = [tid for tid, _ in collections.Counter(r[0] for r in rows).most_common()]
    # The step thread has the most samples. The timed steps are the 0.1 s buckets in which every
    # busy thread has at least half its fullest bucket's samples.
    step = threads[0]
    busy = [tid for tid in threads if len(times[tid]) * 20 > len(times[step])]
    per = {tid: collections.Counter(int(t * 10) for t in times[tid]) for tid in busy}
    full = {tid: max(per[tid].values()) for tid in busy}
    buckets = {b for b in per[step] if all(per[tid][b] * 2 >= full[tid] for tid in busy)}
    if not buckets:
        sys.exit("no stretch where all threads are busy")
    window = [(tid, t, fr) for tid, t, fr in rows if int(t * 10) in buckets]
    span = len(buckets) / 10
    counts = collections.Counter(tid for tid, _, _ in window)
    for tid in busy:
        print(f"thread {tid}: {counts[tid]} samples in {span:.1f} s")
    serial = collections.Counter()
    n = 0
    for tid, _, frames in window:
        if tid != step:
            continue
        n += 1
        par = False
        for f in frames:
            if "train_steps" in f:
                break
            if PARALLEL.search(f):
                par = True
                break
        if not par:
            inner = [re.sub(r"\(.*", "", f)[:70] for f in frames if ENGINE.search(f)]
            serial[" < ".join(inner[:3]) or (frames[0][:70] if frames else "?")] += 1
    total = sum(serial.values())
    print(f"step thread {step}: {total} of {n} samples serial ({100 * total / max(n, 1):.1f} %)")
    for k, v in serial.most_common(20):
        print(f"{v:6d}  {k}", flush=True)


if __name__ == "__main__":
    main()
