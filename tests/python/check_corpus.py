#!/usr/bin/env python3
"""Checks cptsim on the users' corpus that make_corpus.py exported: one row per file.

Columns (each failing cell carries the first line of cptsim's error):
- export: the PyTorch exporter wrote the file (else the exception's first line);
- imports: `cptsim inspect F --format json` exits 0 (`--seq-len T` for a token input with a
  symbolic sequence axis);
- MACs: `cptsim inspect F --batch B [--seq-len T] --format json` at the check input's batch;
  every GEMM layer's MACs and the total equal an independent count from onnxruntime's shapes of
  the same input (ort_macs.py);
- forward: `cptsim forward` equals onnxruntime within 1e-4 · max|y| + 1e-5 (forward_common.py)
  on a seeded input: standard normal images, token ids in [0, vocab);
- train: a tiny overfit: `cptsim train` on one fixed batch for 10 iterations, SBM 8/8 static
  (synthetic images or token sequences with `--subset` = the batch; a language model on a
  periodic text whose every window is the same), `--lr 0.1 --clip-grad 2` (the word-language-model
  rows: the example's `--lr 20 --clip-grad 0.25 --momentum 0`), loss of iteration 10 ≤ 0.7 × that
  of iteration 1 and below 0.9 × chance, ln(outputs) (a net that starts far above chance and
  falls to it has not learned the batch); the evaluation after the last iteration runs on the first 8 test samples
  (`--test-subset 8`: at another batch than training's, the rebinding is exercised, without the
  cost of the whole synthetic test set on a large model);
- run: `cptsim run --model F --accel zc706,bitfusion,stripes` (`--seq-len T` as for imports).

Usage: check_corpus.py --cptsim BIN --dir DIR [--subset ci|all] [--only SUBSTRING]
                       [--markdown OUT.md] [--json OUT.json] [--timeout SECONDS]
                       [--cache DIR] [--baseline corpus-results.json] [--columns C,C]
"""

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_models  # noqa: E402
import ort_macs  # noqa: E402
from forward_common import cptsim_forward, data_input, matches  # noqa: E402

COLUMNS = ("export", "imports", "macs", "forward", "train", "run")
ACCELS = "zc706,bitfusion,stripes"
TRAIN_ITERS = 10
# Below this max|y| the forward comparison drops the tolerance's absolute floor.
VANISHING = 1e-3
# Loss of the last iteration at most this fraction of the first one's.
TRAIN_DROP = 0.7
# ... and at most this fraction of chance, ln(outputs): a loss that falls from far above chance
# (an exploding initial output) to it has not learned the batch.
CHANCE_FRACTION = 0.9
# The overfit's optimizer: SGD at the default rate 0.1 with the global gradient norm clipped to 2.
# Unclipped, a batch of 2 diverges on ImageNet-sized models (torchvision ResNet-18: loss 1469 at
# iteration 5); 0.01 unclipped is too slow for LeNet-5 (2.27 → 2.18); clipped at 2, LeNet-5 goes
# 2.27 → 0.72 and ResNet-18 6.95 → 0.44.
TRAIN_OPT = ["--lr", "0.1", "--clip-grad", "2"]
# The start of the advice train prints when the initial network's output vanishes or explodes.
LSUV_ADVICE = "--init lsuv scales each conv and linear layer"
# The advice train prints when the training loss climbs far above its start (its lr overshoots).
LR_ADVICE = re.compile(r"the steps overshoot on this network; try --lr (\S+)")
# The word-language-model rows train with the example's own recipe (its main.py defaults: plain
# SGD at rate 20, gradient norm clipped to 0.25): at 0.1 an LSTM LM over 1000 words moves from
# 6.92 to 6.77 in 10 iterations, at 20 to 2.93.
WLM_TRAIN_OPT = ["--lr", "20", "--clip-grad", "0.25", "--momentum", "0"]
# The evaluation of synthetic data (images, a classifier's sequences): its first samples only.
TEST_SUBSET = ["--test-subset", "8"]


def cell(ok, msg=""):
    return {"ok": bool(ok), "msg": msg}


def first_line(text):
    """The first line of cptsim's error (its `error:` line, else the first non-empty one)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("error"):
            return line
    return lines[0] if lines else "(no message)"


def cptsim(bin_, args, timeout):
    """(exit code, stdout, stderr); a timeout is exit code None."""
    try:
        p = subprocess.run([bin_, *args], capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s"


def failed(code, err):
    """The cell of a cptsim command that exited with `code` (None: timed out, `err` says so; a
    negative code: killed by that signal, the out-of-memory killer's being SIGKILL)."""
    if code is None:
        return cell(False, err)
    if code < 0:
        cause = " (SIGKILL: the out-of-memory killer, or a user)" if code == -9 else ""
        return cell(False, f"killed by signal {-code}{cause}")
    return cell(False, first_line(err))


class FileCheck:
    """The checks of one corpus file."""

    def __init__(self, args, entry, work):
        self.bin, self.timeout, self.work = args.cptsim, args.timeout, work
        self.entry = entry
        self.path = args.dir / entry["file"]
        self.model = onnx.load(str(self.path), load_external_data=False)
        shape = entry["shape"]
        self.batch = shape[entry["batch_axis"]]
        self.tokens = entry["kind"] == "tokens"
        self.seq = shape[1 - entry["batch_axis"]] if self.tokens else None
        self.x = make_input(entry)

    def seq_flags(self, always=False):
        """`--seq-len T` for a token input (always, or when its sequence axis is symbolic)."""
        if not self.tokens:
            return []
        dims = data_input(self.model).type.tensor_type.shape.dim
        symbolic = any(d.dim_param for d in dims)
        return ["--seq-len", str(self.seq)] if always or symbolic else []

    def imports(self):
        code, _, err = cptsim(self.bin, ["inspect", str(self.path), "--format", "json",
                                         *self.seq_flags()], self.timeout)
        return cell(True) if code == 0 else failed(code, err)

    def reference(self):
        """onnxruntime's output and every GEMM node's shapes on the check input."""
        if not hasattr(self, "_ref"):
            feeds = feeds_for(self.model, self.x)
            outs, shapes = ort_macs.probe_run(self.path, feeds)
            self._ref = (outs[0], shapes)
        return self._ref

    def macs(self):
        code, out, err = cptsim(self.bin, ["inspect", str(self.path), "--batch", str(self.batch),
                                           "--format", "json", *self.seq_flags(always=True)],
                                self.timeout)
        if code != 0:
            return failed(code, err)
        ours = [(layer["name"], layer["gemm"]["macs"]) for layer in json.loads(out)["layers"]]
        rows = ort_macs.count_macs(self.path, self.reference()[1])
        return compare_macs(ours, [(n, m) for n, _, m in rows])

    def forward(self):
        y, err = cptsim_forward(self.bin, self.path, self.x, self.work, timeout=self.timeout)
        if y is None:
            return cell(False, first_line(err))
        ref = self.reference()[0]
        scale = float(np.max(np.abs(ref)))
        if scale >= VANISHING:
            return cell(*matches(y, ref))
        # A random-init model whose output vanishes on any input (EfficientNet in eval mode:
        # BN at its initial running statistics is an identity, and the signal decays through
        # the blocks to ~1e-14): the absolute floor of the tolerance would pass anything, so
        # compare relatively only.
        if y.shape != ref.shape or not np.all(np.isfinite(y)):
            return cell(*matches(y, ref))
        diff = float(np.max(np.abs(y.astype(np.float64) - ref)))
        ok = diff <= 1e-4 * scale
        return cell(ok, f"max|diff| {diff:.3g}, relative tolerance only {1e-4 * scale:.3g} "
                        f"(onnxruntime's output vanishes: max|y| {scale:.3g})")

    def train(self):
        out = self.work / "run"
        flags = ["train", "--model", str(self.path), "--iters", str(TRAIN_ITERS),
                 "--batch", str(self.batch), "--eval-every", str(TRAIN_ITERS),
                 "--schedule", "static", "--bits", "8", "--grad-bits", "8",
                 "--quantizer", "sbm", "--out", str(out)]
        flags += WLM_TRAIN_OPT if self.entry["family"] == "wlm" else TRAIN_OPT
        if self.entry["family"] == "wlm" or self.entry["case"] == "hf_gpt2":  # LMs
            text = self.work / "periodic.txt"
            text.write_text(periodic_text(self.seq, self.batch))
            flags += ["--data", f"text:{text}", *self.seq_flags(always=True)]
        else:  # images, or a sequence classifier's token ids: synthetic data of its input
            flags += ["--data", "synthetic", "--subset", str(self.batch), *TEST_SUBSET,
                      *self.seq_flags()]
        result, err = self.train_once(flags)
        tried = []
        if not result[0] and LSUV_ADVICE in err:
            # What the user does next: train warned that the initial network's signal
            # vanishes or explodes, or that it is deep without normalization layers, and
            # named --init lsuv.
            tried.append(f"with --init lsuv, as train's warning advises; without: {result[1]}")
            flags = [*flags, "--init", "lsuv"]
            result, err = self.train_once(flags)
        advice = LR_ADVICE.search(err)
        if not result[0] and advice:
            # train warned that the loss climbed far above its start and named a lower --lr.
            lr = advice[1]
            tried.append(f"at --lr {lr}, as train's warning advises; at {flag(flags, '--lr')}: "
                         f"{result[1]}")
            flags = with_flag(flags, "--lr", lr)
            result, _ = self.train_once(flags)
        return cell(result[0], result[1] + "".join(f" ({t})" for t in reversed(tried)))

    def train_once(self, flags):
        """(passed, message) of one train run, and its stderr."""
        code, _, err = cptsim(self.bin, flags, 3 * self.timeout)
        if code != 0:
            return (False, failed(code, err)["msg"]), err
        losses = {int(m[1]): float(m[2])
                  for m in re.finditer(r"^iter (\d+)/\d+\s+loss (\S+)", err, re.M)}
        if 1 not in losses or TRAIN_ITERS not in losses:
            return (False, f"no loss of iterations 1 and {TRAIN_ITERS} in the progress "
                           f"lines: {sorted(losses)}"), err
        first, last = losses[1], losses[TRAIN_ITERS]
        msg = f"loss {first:.4g} → {last:.4g}"
        if not (np.isfinite(last) and last <= TRAIN_DROP * first):
            return (False, msg + f" (falls less than {100 * (1 - TRAIN_DROP):.0f} %)"), err
        chance = self.chance_loss()
        if chance is not None and last > CHANCE_FRACTION * chance:
            return (False, msg + f" (not below {CHANCE_FRACTION} · chance, "
                                 f"{CHANCE_FRACTION} · ln {self.outputs()} = "
                                 f"{CHANCE_FRACTION * chance:.4g})"), err
        return (True, msg), err

    def outputs(self):
        """The size of the output's last axis (classes, or an LM's vocabulary), if fixed."""
        dims = self.model.graph.output[0].type.tensor_type.shape.dim
        return dims[-1].dim_value if dims and dims[-1].dim_value > 1 else None

    def chance_loss(self):
        """Cross-entropy of a uniform guess over the outputs: ln(outputs)."""
        n = self.outputs()
        return float(np.log(n)) if n else None

    def run(self):
        code, _, err = cptsim(self.bin, ["run", "--model", str(self.path), "--accel", ACCELS,
                                         *self.seq_flags()], self.timeout)
        return cell(True) if code == 0 else failed(code, err)


def flag(flags, name):
    """The value of `name` in a command line."""
    return flags[flags.index(name) + 1]


def with_flag(flags, name, value):
    """The command line with `name`'s value replaced."""
    i = flags.index(name)
    return [*flags[:i + 1], value, *flags[i + 2:]]


def compare_macs(ours, ref):
    """Per-layer and total MACs: cptsim's [(name, macs)] against the independent count.

    Layers pair by name; those whose names differ pair in graph order. The two layers cptsim
    makes of a bidirectional recurrent node (`X` and `X/reverse`) pair with the node as one."""
    merged = []
    for n, m in ours:
        if merged and n == f"{merged[-1][0]}/reverse":
            merged[-1] = (merged[-1][0], merged[-1][1] + m)
        else:
            merged.append((n, m))
    ours = merged
    total_ours, total_ref = sum(m for _, m in ours), sum(m for _, m in ref)
    ref_by_name = dict(ref)
    ours_by_name = dict(ours)
    bad = [f"{n}: cptsim {m:,} vs {ref_by_name[n]:,}" for n, m in ours
           if n in ref_by_name and m != ref_by_name[n]]
    left_ours = [(n, m) for n, m in ours if n not in ref_by_name]
    left_ref = [(n, m) for n, m in ref if n not in ours_by_name]
    if len(left_ours) != len(left_ref):
        bad.append(f"{len(ours)} GEMM layers in cptsim, {len(ref)} GEMM nodes in the file "
                   f"(unmatched: cptsim {[n for n, _ in left_ours][:3]}, file "
                   f"{[n for n, _ in left_ref][:3]})")
    else:
        bad += [f"{a} / {b}: cptsim {m:,} vs {r:,}" for (a, m), (b, r) in zip(left_ours, left_ref)
                if m != r]
    summary = f"total {total_ours:,}" + ("" if total_ours == total_ref else f" vs {total_ref:,}")
    if bad or total_ours != total_ref:
        more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
        return cell(False, f"{summary}; {bad[0] if bad else 'totals differ'}{more}")
    return cell(True, summary)


def make_input(entry, seed=0):
    rng = np.random.default_rng(seed)
    if entry["kind"] == "tokens":
        return rng.integers(0, entry["vocab"], entry["shape"]).astype(np.int64)
    return rng.standard_normal(entry["shape"]).astype(np.float32)


def feeds_for(model, x):
    """The check input for the data input; zeros for the other graph inputs (initial states,
    which cptsim binds to zeros)."""
    inits = {t.name for t in model.graph.initializer}
    first = data_input(model).name
    feeds = {first: x}
    types = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64}
    for i in model.graph.input:
        if i.name in inits or i.name == first:
            continue
        t = i.type.tensor_type
        feeds[i.name] = np.zeros([d.dim_value for d in t.shape.dim], types[t.elem_type])
    return feeds


def periodic_text(period, streams):
    """Lowercase letters repeating with `period`: every window of a stream holds the same tokens."""
    rng = np.random.default_rng(0)
    unit = "".join(chr(ord("a") + int(c)) for c in rng.integers(0, 26, period))
    return unit * (40 * streams + 8)


def check_file(args, stem, entry):
    row = {"file": stem, "family": entry["family"], "exporter": entry["exporter"],
           "note": entry.get("note", ""), "entry": entry}
    if entry.get("file") is None:
        row["export"] = cell(False, entry["export_error"])
        for c in COLUMNS[1:]:
            row[c] = cell(False, "no file (export failed)")
        return row
    row["export"] = cell(True)
    earlier = earlier_row(args, stem)
    with tempfile.TemporaryDirectory() as work:
        fc = FileCheck(args, entry, Path(work))
        for c in COLUMNS[1:]:
            if args.columns and c not in args.columns:
                row[c] = carried(earlier, c)
                continue
            t0 = time.monotonic()
            try:
                row[c] = getattr(fc, c)()
            except Exception as e:  # the checker's own failure: reported, never hidden
                row[c] = cell(False, f"checker: {type(e).__name__}: {str(e).splitlines()[0]}")
            row[c]["seconds"] = round(time.monotonic() - t0, 1)
    return row


def not_exported(stem, entry=None):
    """The row of a file the export run did not reach (`entry` None) or that was exported but
    not checked (--report-only)."""
    exporter = stem.rsplit("_", 1)[1]
    row = {"file": stem, "family": (entry or {}).get("family", ""), "exporter": exporter,
           "note": (entry or {}).get("note", "")}
    if entry is None:
        row["export"] = cell(False, "not in the manifest: the make_corpus.py run this table "
                                    "comes from did not reach this file")
    elif entry.get("file") is None:
        row["export"] = cell(False, entry["export_error"])
    else:
        row["export"] = cell(True)
    for c in COLUMNS[1:]:
        row[c] = cell(False, "not checked: the check_corpus.py run this table comes from did "
                             "not reach this file" if entry else "no file")
    row["checked"] = False
    return row


def earlier_row(args, stem):
    """The cached row of `stem` whatever its age (the cells --columns does not recheck)."""
    path = args.cache / f"{stem}.json" if args.cache else None
    return json.loads(path.read_text()) if path and path.exists() else None


def carried(earlier, column):
    """A cell --columns left out: the earlier run's, marked as such, or "not checked"."""
    if earlier and column in earlier:
        c = dict(earlier[column])
        c["msg"] = f"{c.get('msg', '')} (earlier run)".strip()
        return c
    return cell(False, "not checked: this run checked only --columns")


def cached(args, stem, entry):
    """The cached row of `stem` if it was checked on this manifest entry and is newer than its
    file and the cptsim binary."""
    if not args.cache:
        return None
    path = args.cache / f"{stem}.json"
    sources = [Path(args.cptsim)] + ([args.dir / entry["file"]] if entry.get("file") else [])
    if not path.exists() or any(path.stat().st_mtime < p.stat().st_mtime for p in sources):
        return None
    row = json.loads(path.read_text())
    return row if row.get("entry") == entry else None


def versions(bin_):
    import onnxruntime
    import torch
    import torchvision
    import transformers

    v = subprocess.run([bin_, "--version"], capture_output=True, text=True).stdout.split()[-1]
    repo = Path(__file__).resolve().parent
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    v = f"{v} ({commit})" if commit else v
    return {"torch": torch.__version__, "torchvision": torchvision.__version__,
            "transformers": transformers.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "cptsim": v}


def totals(rows):
    """Pass counts per column: all files, per exporter, per family."""
    out = {}
    families = sorted({r["family"] for r in rows if r["family"]})
    for group in ("all", "legacy", "dynamo", *families):
        sel = [r for r in rows if group in ("all", r["exporter"], r["family"])]
        out[group] = {"files": len(sel), "checked": sum(r.get("checked", True) for r in sel),
                      **{c: sum(r[c]["ok"] for r in sel) for c in COLUMNS}}
    return out


def short(msg, limit=240):
    """A cell's message for the table: the import error's list of supported ops (the same in
    every cell) left out, at most `limit` characters (the JSON keeps the whole line)."""
    msg = msg.split("; supported ops:")[0]
    msg = re.sub(r"(?<![\w.])/\S*/([^/\s]+\.onnx)", r"\1", msg)  # the corpus file by its name
    msg = re.sub(r"/tmp/\S+/", "", msg)  # the checker's scratch directory
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def markdown(rows, meta):
    esc = lambda s: s.replace("|", "\\|").replace("\n", " ")
    mark = lambda c: ("✅ " if c["ok"] else "❌ ") + esc(short(c["msg"]))
    lines = [
        "# cptsim on users' PyTorch exports",
        "",
        f"Generated {meta['date']} by `tests/python/check_corpus.py` on the corpus that "
        "`tests/python/make_corpus.py` exports (random init, no downloads, weights the init "
        "leaves all zero drawn at random; every torchvision "
        "classification model, Hugging Face BERT, DistilBERT, RoBERTa, GPT-2 and ViT, PyTorch's "
        "word-language-model LSTM, GRU and Transformer, bidirectional LSTM/GRU classifiers; each "
        "with the legacy and the dynamo exporter). Versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
        "",
        "Columns: **export** the exporter wrote the file; **imports** `cptsim inspect` reads it; "
        "**MACs** every GEMM layer's MACs and the total at the check input equal a count from "
        "onnxruntime's shapes of that input; **forward** `cptsim forward` equals onnxruntime "
        "(max|diff| ≤ 1e-4·max|y| + 1e-5); **train** 10 iterations of `cptsim train` on one "
        "fixed batch at SBM 8/8 bring the loss down by at least 30 % and below 0.9 × chance, "
        "ln(outputs) "
        "(then an evaluation of 8 "
        "test samples runs); **run** `cptsim run "
        "--accel zc706,bitfusion,stripes` costs it. A failing cell holds the first line of the "
        "error. Regenerate with `tests/python/run_corpus.sh all DIR` and copy "
        "`DIR/corpus-results.{md,json}` here.",
        "",
        "| file | export | imports | MACs | forward | train | run |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        note = f" ({esc(r['note'])})" if r["note"] else ""
        lines.append(f"| `{r['file']}`{note} | " + " | ".join(mark(r[c]) for c in COLUMNS) + " |")
    lines += ["", "Passing cells per column (checked: files the run exported and checked):", "",
              "| totals | files | checked | " + " | ".join(COLUMNS) + " |",
              "|---|---|---|" + "---|" * len(COLUMNS)]
    for group, t in meta["totals"].items():
        lines.append(f"| {group} | {t['files']} | {t['checked']} | "
                     + " | ".join(str(t[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cptsim", required=True)
    ap.add_argument("--dir", required=True, type=Path, help="the corpus (make_corpus.py --dir)")
    ap.add_argument("--subset", choices=["ci", "all"], default="all")
    ap.add_argument("--only", default="", help="only the files whose name contains this")
    ap.add_argument("--columns", type=lambda v: [c for c in v.split(",") if c],
                    default=[], help="check only these columns (comma-separated, of imports, "
                                     "macs, forward, train, run); the others keep the cached "
                                     "row's cells, marked '(earlier run)'")
    ap.add_argument("--markdown", type=Path, help="write the table here")
    ap.add_argument("--json", type=Path, help="write the rows and totals here")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cptsim command "
                    "(train: three times this)")
    ap.add_argument("--baseline", type=Path, help="a --json output: exit 1 if a cell that "
                    "passed there fails now (cells that failed there may pass)")
    ap.add_argument("--report-only", action="store_true", help="check nothing: write the table "
                    "from the --cache rows (files without one are listed as not checked)")
    ap.add_argument("--cache", type=Path, help="keep each file's row here and reuse the rows "
                    "newer than their file and the cptsim binary (default: no reuse)")
    args = ap.parse_args()
    manifest = json.loads((args.dir / "manifest.json").read_text())
    # Every file of the selection, also those the exporter has not reached (listed as such).
    stems = [s for s in corpus_models.stems(args.subset) if args.only in s]
    started = time.monotonic()
    rows = []
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    for stem in stems:
        t0 = time.monotonic()
        if stem not in manifest:
            rows.append(not_exported(stem))
            print(f"{stem:<44} not in {args.dir}/manifest.json", flush=True)
            continue
        row = cached(args, stem, manifest[stem])
        if row is None and args.report_only:
            row = not_exported(stem, manifest[stem])
        elif row is None:
            row = check_file(args, stem, manifest[stem])
            if args.cache:
                tmp = args.cache / f"{stem}.tmp"
                tmp.write_text(json.dumps(row))
                tmp.replace(args.cache / f"{stem}.json")
        rows.append(row)
        marks = " ".join(f"{c}:{'ok' if row[c]['ok'] else 'FAIL'}" for c in COLUMNS)
        print(f"{stem:<44} {marks}  [{time.monotonic() - t0:.0f} s]", flush=True)
        for c in COLUMNS:
            if not row[c]["ok"]:
                print(f"    {c}: {row[c]['msg']}", flush=True)
    meta = {"date": datetime.date.today().isoformat(), "versions": versions(args.cptsim),
            "totals": totals(rows), "seconds": round(time.monotonic() - started)}
    if args.markdown:
        args.markdown.write_text(markdown(rows, meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    t = meta["totals"]["all"]
    print(f"corpus check: {t['files']} files, " + ", ".join(f"{c} {t[c]}" for c in COLUMNS)
          + f" passed; {meta['seconds']} s")
    if args.baseline:
        lost = regressions(json.loads(args.baseline.read_text())["rows"], rows)
        for line in lost:
            print(f"REGRESSION {line}")
        print(f"corpus regressions: {len(rows) - len({x.split()[0] for x in lost})} passed, "
              f"{len({x.split()[0] for x in lost})} failed")
        return 1 if lost else 0
    return 0


def regressions(baseline, rows):
    """'file column: message' for every cell that passed in `baseline` and fails in `rows`."""
    before = {r["file"]: r for r in baseline}
    return [f"{r['file']} {c}: {r[c]['msg']}" for r in rows if r["file"] in before
            for c in COLUMNS if before[r["file"]][c]["ok"] and not r[c]["ok"]]


if __name__ == "__main__":
    sys.exit(main())
