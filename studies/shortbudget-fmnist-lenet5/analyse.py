#!/usr/bin/env python3
"""Paired comparison of the short-budget study's arms (standard library only).

Reads the sweep's cells (`cell.json` keys, `run/summary.json`), with --fp32 the fp32 runs
(`DIR/ITERS-SEED/summary.json`) and with --reference the reference implementation's rows
(`iters,arm,seed,acc` as reference.py writes them), and prints per budget: each arm's final test
accuracy (mean ± sample std over seeds), the paired difference to static 8/8 of the same seed
(mean ± sd), how many pairs are negative, the two-sided paired t-test p and the two-sided exact
sign-test p; the reference's rows as arms of their own ("reference static 8/8", ...).

Usage: analyse.py CELLS_DIR [--fp32 DIR] [--reference CSV] [--csv OUT.csv]
"""

import argparse
import json
import math
from pathlib import Path


def betacf(a, b, x):
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betai(a, b, x):
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    front = math.exp(lbeta + a * math.log(x) + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1.0 - x) / b


def paired_t_p(d):
    """Two-sided p of the paired t-test on differences d."""
    n = len(d)
    m = sum(d) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1))
    if sd == 0.0:
        return 0.0 if m != 0.0 else 1.0
    t = m / (sd / math.sqrt(n))
    df = n - 1
    return betai(df / 2.0, 0.5, df / (df + t * t))


def welch_p(a, b):
    """Two-sided p of Welch's t-test between two independent samples."""
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    va, vb = sa * sa / len(a), sb * sb / len(b)
    if va + vb == 0.0:
        return 0.0 if ma != mb else 1.0
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return betai(df / 2.0, 0.5, df / (df + t * t))


def sign_p(d):
    """Two-sided exact sign test (ties dropped)."""
    neg = sum(1 for x in d if x < 0)
    pos = sum(1 for x in d if x > 0)
    n = neg + pos
    k = min(neg, pos)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def mean_sd(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def arm_of(keys):
    """The arm's label: fp32, static B/8 or CPT LO-HI/8 with its cycle count."""
    if keys.get("quantizer") == "none":
        return "fp32"
    if keys.get("schedule") == "static":
        return f"static {keys['bits']}/{keys['grad_bits']}"
    lo_hi = str(keys["bits"]).replace(":", "-")
    return f"CPT {lo_hi}/{keys['grad_bits']}, {keys.get('cycles', 32)} cycles"


STATIC, CPT = "static 8/8", "CPT 3-8/8, 32 cycles"


def fmt(v):
    return "%.2f ± %.2f" % mean_sd(v) if len(v) > 1 else "—"


def paired(acc, iters, arm, base):
    """Seeds with both arms, the arm's and the base's accuracies and their differences."""
    seeds = sorted(s for (i, a, s) in acc if i == iters and a == base and (i, arm, s) in acc)
    x = [acc[(iters, arm, s)] for s in seeds]
    y = [acc[(iters, base, s)] for s in seeds]
    return x, y, [p - q for p, q in zip(x, y)]


def stats(d):
    neg = sum(1 for x in d if x < 0)
    m, sd = mean_sd(d)
    return f"{m:+.2f} ± {sd:.2f} | {neg}/{len(d)} | {paired_t_p(d):.3f} | {sign_p(d):.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cells")
    ap.add_argument("--fp32")
    ap.add_argument("--reference")
    ap.add_argument("--csv")
    args = ap.parse_args()
    acc = {}  # (iters, arm, seed) -> final test accuracy, %
    for cell in sorted(Path(args.cells).iterdir()):
        summary = cell / "run" / "summary.json"
        if not (cell / "cell.json").is_file() or not summary.is_file():
            continue
        keys = json.loads((cell / "cell.json").read_text())["keys"]
        s = json.loads(summary.read_text())
        acc[(int(keys["iters"]), arm_of(keys), int(keys["seed"]))] = 100.0 * s["final_test_acc"]
    if args.fp32:
        for run in sorted(Path(args.fp32).iterdir()):
            summary = run / "summary.json"
            if summary.is_file():
                iters, seed = run.name.split("-")
                s = json.loads(summary.read_text())
                acc[(int(iters), "fp32", int(seed))] = 100.0 * s["final_test_acc"]
    if args.reference:
        for line in Path(args.reference).read_text().split():
            iters, arm, seed, a = line.split(",")
            label = {"static": STATIC, "cpt": CPT}[arm]
            acc[(int(iters), "reference " + label, int(seed))] = float(a)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("iters,arm,seed,final_test_acc\n")
            for (iters, arm, seed), a in sorted(acc.items()):
                f.write(f'{iters},"{arm}",{seed},{a:.2f}\n')
    fp32 = "fp32 | " if args.fp32 else ""
    print(f"| iterations | implementation | {fp32}static 8/8 | CPT 3-8/8 | CPT − static | negative | t-test p | sign p |")
    print("|---:|---|" + "---:|" * (7 if args.fp32 else 6))
    budgets = sorted({k[0] for k in acc})
    for iters in budgets:
        for impl, prefix in (("cptsim", ""), ("reference", "reference ")):
            cp, st, d = paired(acc, iters, prefix + CPT, prefix + STATIC)
            if len(d) < 2:
                continue
            fp = [acc[(iters, "fp32", s)] for s in range(100) if (iters, "fp32", s) in acc]
            fp = f"{fmt(fp) if impl == 'cptsim' else '—'} | " if args.fp32 else ""
            print(f"| {iters} | {impl} | {fp}{fmt(st)} | {fmt(cp)} | {stats(d)} |")
    for iters in budgets:
        d_sim = paired(acc, iters, CPT, STATIC)[2]
        d_ref = paired(acc, iters, "reference " + CPT, "reference " + STATIC)[2]
        if len(d_sim) > 1 and len(d_ref) > 1:
            print(
                f"\n{iters} iterations: CPT − static, cptsim against the reference: "
                f"{mean_sd(d_sim)[0] - mean_sd(d_ref)[0]:+.2f} pp, Welch t-test p {welch_p(d_sim, d_ref):.3f}"
            )
    for iters in budgets:
        arms = {a for (i, a, _) in acc if i == iters and not a.startswith("reference")}
        arms = sorted(arms - {STATIC})
        for base in (STATIC, CPT):
            rows = [(a, paired(acc, iters, a, base)) for a in arms if a != base]
            rows = [(a, x, d) for a, (x, _, d) in rows if len(d) > 1]
            if len(rows) < 2:
                continue
            print(f"\n{iters} iterations, each arm against {base} of the same seed:\n")
            print(f"| arm | seeds | final test acc. | − {base} | negative | t-test p | sign p |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for a, x, d in rows:
                print(f"| {a} | {len(d)} | {fmt(x)} | {stats(d)} |")


if __name__ == "__main__":
    main()
