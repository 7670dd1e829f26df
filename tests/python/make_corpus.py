#!/usr/bin/env python3
"""Exports the users' corpus (corpus_models.py) with PyTorch's legacy and dynamo exporters.

Every case is built with random init (no downloads) and exported twice, as
`DIR/<case>_legacy.onnx` (`torch.onnx.export(..., dynamo=False)`, dynamic batch axis — and
sequence axis for token models — unless the case is static) and `DIR/<case>_dynamo.onnx`
(`dynamo=True`, the same axes as named `torch.export.Dim`s; if the exporter refuses them, static
shapes, and the manifest says so). A Transformers model is exported with its default attention
(SDPA) and, where that does not export, with `attn_implementation="eager"` (noted). An export
that fails is recorded with the exception's first line; nothing is skipped silently.
`DIR/manifest.json` lists every file with its input (shape, kind, vocabulary, batch axis) for
check_corpus.py. Existing files (and recorded export failures) are kept unless --force.

Usage: make_corpus.py --dir DIR [--subset ci|all] [--only SUBSTRING] [--force]
"""

import argparse
import json
import os
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_models  # noqa: E402

EXPORTERS = ("legacy", "dynamo")
# Above this many bytes of parameters the weights go to an external data file (protobuf's 2 GiB).
EXTERNAL_BYTES = 1_800_000_000


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_line(e):
    """`Type: first line of the message`, and the same of its cause (the dynamo exporter wraps
    the real reason in a generic TorchExportError)."""
    def line(x):
        text = ANSI.sub("", f"{type(x).__name__}: {x}").strip()
        return next((t.strip() for t in text.splitlines() if t.strip()), type(x).__name__)

    cause = e.__cause__ or e.__context__
    return line(e) + (f" (cause: {line(cause)})" if cause is not None else "")


def names(inputs):
    """`input`, then `state0`, `state1`, … for the flattened initial-state tensors."""
    return ["input"] + [f"state{i}" for i in range(len(flat(inputs)) - 1)]


def flat(inputs):
    out = []
    for x in inputs:
        out.extend(x if isinstance(x, (tuple, list)) else [x])
    return out


def export_legacy(model, inputs, path, case, large):
    axes = {"input": case.dynamic, "output": case.out_dynamic} if case.dynamic else None
    torch.onnx.export(model, inputs, str(path), dynamo=False, input_names=names(inputs),
                      output_names=["output"], dynamic_axes=axes)


def export_dynamo(model, inputs, path, case, large):
    """Returns a note when the named dynamic axes had to be dropped."""
    kwargs = dict(dynamo=True, external_data=large, input_names=names(inputs),
                  output_names=["output"])
    if not case.dynamic:
        torch.onnx.export(model, inputs, str(path), **kwargs)
        return ""
    dims = {a: torch.export.Dim(n, min=1, max=4096) for a, n in case.dynamic.items()}
    shapes = (dims,) + tuple(None for _ in inputs[1:])
    try:
        torch.onnx.export(model, inputs, str(path), dynamic_shapes=shapes, **kwargs)
        return ""
    except Exception as e:
        note = f"dynamic axes refused ({first_line(e)}); exported with static shapes"
    torch.onnx.export(model, inputs, str(path), **kwargs)
    return note


def export_one(case, exporter, model, inputs, path, attn_note):
    large = sum(p.numel() for p in model.parameters()) * 4 > EXTERNAL_BYTES
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "legacy":
            export_legacy(model, inputs, path, case, large)
            note = ""
        else:
            note = export_dynamo(model, inputs, path, case, large)
    notes = [n for n in (case.note, attn_note, note,
                         "weights in an external data file" if large else "") if n]
    return {"export_seconds": round(time.monotonic() - start, 1), "note": "; ".join(notes)}


def export_case(case, exporter, path, built):
    """Builds (once per case and attention choice: `built` keeps them) and exports; returns the
    manifest fields (file or export_error).

    The legacy exporter cannot write an adaptive average pool whose output size does not divide
    its input (AlexNet's and VGG's 6×6 and 7×7 pools on 64×64 images): such an image model is
    exported at the next size of IMAGE_LADDER that works, and the note says so."""
    attn_note, refused = "", None
    attempts = [None, "eager"] if getattr(case, "attn_choice", False) else [None]
    for attn in attempts:
        try:
            if attn not in built:
                model = case.build(attn) if attn else case.build()
                with torch.no_grad():
                    built[attn] = (model, case.inputs(model))
            model, inputs = built[attn]
            while True:
                try:
                    fields = export_one(case, exporter, model, inputs, path, attn_note)
                    break
                except Exception as e:
                    if case.kind != "image" or "adaptive_avg_pool2d" not in str(e):
                        raise
                    size = inputs[0].shape[-1]
                    refused = refused or (size, first_line(e))
                    with torch.no_grad():
                        inputs = case.inputs(model, above=size)
            if refused:
                side = inputs[0].shape[-1]
                note = (f"exported at {side}x{side}, the first size from {refused[0]} up that "
                        f"exports (at {refused[0]}x{refused[0]}: {refused[1]})")
                fields["note"] = "; ".join(n for n in (fields["note"], note) if n)
            return dict(fields, file=path.name, shape=list(inputs[0].shape))
        except Exception as e:
            err = first_line(e)
            if attn is None and len(attempts) > 1:
                attn_note = f"default attention does not export ({err}); attn_implementation=eager"
                continue
            path.unlink(missing_ok=True)
            return {"file": None, "export_error": err, "note": attn_note,
                    "shape": case.shape, "trace": traceback.format_exc(limit=3)[-600:]}
    raise AssertionError("unreachable")


def write_entry(manifest_path, stem, entry):
    """Adds one entry to the manifest on disk (re-read first, so that runs on other --only
    selections writing the same directory keep each other's entries), atomically."""
    on_disk = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    on_disk[stem] = entry
    tmp = manifest_path.with_name(f".manifest-{os.getpid()}.tmp")
    tmp.write_text(json.dumps(on_disk, indent=1, sort_keys=True))
    tmp.replace(manifest_path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, type=Path, help="output directory (outside the repo)")
    ap.add_argument("--subset", choices=["ci", "all"], default="all")
    ap.add_argument("--only", default="", help="only the files whose name contains this")
    ap.add_argument("--force", action="store_true", help="re-export existing files too")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    manifest_path = args.dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    torch.set_num_threads(2)
    started = time.monotonic()
    wrote = kept = failed = 0
    for case in corpus_models.all_cases():
        built = {}
        for exporter in EXPORTERS:
            stem = f"{case.name}_{exporter}"
            if args.subset == "ci" and stem not in corpus_models.CI_SUBSET:
                continue
            if args.only not in stem:
                continue
            path = args.dir / f"{stem}.onnx"
            old = manifest.get(stem)
            if not args.force and old and (old.get("file") is None or path.exists()):
                kept += 1
                continue
            t0 = time.monotonic()
            fields = export_case(case, exporter, path, built)
            entry = {"case": case.name, "family": case.family, "exporter": exporter,
                     "kind": case.kind, "vocab": case.vocab, "batch_axis": case.batch_axis,
                     **fields}
            manifest[stem] = entry
            write_entry(manifest_path, stem, entry)
            status = entry["file"] or f"EXPORT FAILED: {entry['export_error']}"
            print(f"{stem:<45} {time.monotonic() - t0:6.1f} s  {status}", flush=True)
            failed += entry["file"] is None
            wrote += entry["file"] is not None
    print(f"corpus: {wrote} written, {failed} export failures, {kept} kept, "
          f"{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
