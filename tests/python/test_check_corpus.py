"""Tests of check_corpus.py's own logic: zoo models, where every column is known to pass, pass;
a wrong MAC count (in cptsim's JSON or in the file's shapes) is flagged; the independent MAC
count follows the documented rules on a hand-built graph.

Run: CPTSIM=target/release/cptsim /path/to/venv/bin/python -m pytest tests/python/test_check_corpus.py
Without the binary (CPTSIM, else target/release/cptsim) the tests that need it print
`SKIPPED: …` and skip, or fail under CPTSIM_REQUIRE_BINARY=1.
"""

import json
import os
import stat
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import check_corpus  # noqa: E402
import ort_macs  # noqa: E402

ZOO = {"resnet20": [2, 3, 32, 32], "lenet5": [2, 1, 28, 28]}


def binary():
    path = Path(os.environ.get("CPTSIM", HERE.parent.parent / "target/release/cptsim"))
    if path.exists():
        return path.resolve()
    reason = f"no cptsim binary at {path} (cargo build --release -p cptsim, or set CPTSIM)"
    if os.environ.get("CPTSIM_REQUIRE_BINARY") == "1":
        pytest.fail(f"CPTSIM_REQUIRE_BINARY=1 but {reason}")
    print(f"SKIPPED: {os.environ.get('PYTEST_CURRENT_TEST', 'test')}: {reason}", file=sys.stderr)
    pytest.skip(reason)


def zoo_corpus(tmp, cptsim):
    """A corpus directory of the zoo models with their manifest."""
    manifest = {}
    for name, shape in ZOO.items():
        subprocess.run([str(cptsim), "zoo", "export", name, "-o", str(tmp / f"{name}.onnx")],
                       check=True, stdout=subprocess.DEVNULL)
        manifest[name] = {"case": name, "family": "zoo", "exporter": "cptsim",
                          "file": f"{name}.onnx", "kind": "image", "vocab": 0, "batch_axis": 0,
                          "shape": shape, "note": ""}
    (tmp / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def args_for(cptsim, tmp):
    return Namespace(cptsim=str(cptsim), dir=tmp, timeout=600, columns=None, cache=None)


def test_zoo_models_pass_every_column(tmp_path):
    cptsim = binary()
    manifest = zoo_corpus(tmp_path, cptsim)
    for stem, entry in manifest.items():
        row = check_corpus.check_file(args_for(cptsim, tmp_path), stem, entry)
        for c in check_corpus.COLUMNS:
            assert row[c]["ok"], f"{stem} {c}: {row[c]['msg']}"
    # resnet20's 40 818 944 MACs per image (spec §2.3) at the check's batch of 2
    row = check_corpus.check_file(args_for(cptsim, tmp_path), "resnet20", manifest["resnet20"])
    assert row["macs"]["msg"] == f"total {2 * 40_818_944:,}"


def fake_cptsim(tmp, real, layer_factor=1.0):
    """A wrapper of `real` whose `inspect --format json` reports the first layer's batch MACs
    times `layer_factor` (an off-by-a-factor count in one layer)."""
    script = tmp / "fake-cptsim"
    script.write_text(f"""#!{sys.executable}
import json, subprocess, sys
p = subprocess.run([{str(real)!r}, *sys.argv[1:]], capture_output=True, text=True)
out = p.stdout
if sys.argv[1] == "inspect" and "json" in sys.argv and p.returncode == 0:
    j = json.loads(out)
    j["layers"][0]["gemm"]["macs"] = int(j["layers"][0]["gemm"]["macs"] * {layer_factor})
    out = json.dumps(j)
sys.stdout.write(out); sys.stderr.write(p.stderr); sys.exit(p.returncode)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_a_wrong_layer_count_in_cptsim_is_flagged(tmp_path):
    cptsim = binary()
    manifest = zoo_corpus(tmp_path, cptsim)
    fake = fake_cptsim(tmp_path, cptsim, layer_factor=2.0)
    fc = check_corpus.FileCheck(args_for(fake, tmp_path), manifest["resnet20"], tmp_path)
    c = fc.macs()
    assert not c["ok"]
    assert "conv1: cptsim 1,769,472 vs 884,736" in c["msg"], c["msg"]


def test_a_loss_that_falls_only_to_chance_fails_the_overfit(tmp_path):
    cptsim = binary()
    manifest = zoo_corpus(tmp_path, cptsim)
    # A train whose loss falls from far above chance to chance (0.9 · ln 100 = 4.145 for resnet20).
    fake = tmp_path / "falls-to-chance"
    fake.write_text(f"""#!{sys.executable}
import sys
sys.stderr.write("iter 1/10  loss 9.000\\niter 10/10  loss 4.300\\n")
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    fc = check_corpus.FileCheck(args_for(fake, tmp_path), manifest["resnet20"], tmp_path)
    (ok, msg), _ = fc.train_once(["train"])
    assert not ok and "not below 0.9 · chance, 0.9 · ln 100 = 4.145" in msg, msg
    fake.write_text(fake.read_text().replace("4.300", "4.000"))
    (ok, msg), _ = fc.train_once(["train"])
    assert ok, msg


def test_a_killed_command_says_so_instead_of_quoting_a_note():
    c = check_corpus.failed(-9, "note: no BatchNormalization in the graph\n")
    assert not c["ok"] and c["msg"].startswith("killed by signal 9 (SIGKILL"), c["msg"]
    assert check_corpus.failed(2, "note: x\nerror: y\n")["msg"] == "error: y"
    assert check_corpus.failed(None, "timed out after 5 s")["msg"] == "timed out after 5 s"


def test_compare_macs_flags_per_layer_and_total_differences():
    ref = [("a", 10), ("b", 20), ("c", 30)]
    assert check_corpus.compare_macs(ref, ref)["ok"]
    # same total, two layers wrong: still flagged
    swapped = check_corpus.compare_macs([("a", 20), ("b", 10), ("c", 30)], ref)
    assert not swapped["ok"] and "a: cptsim 20 vs 10" in swapped["msg"]
    # a layer missing
    missing = check_corpus.compare_macs([("a", 10), ("b", 20)], ref)
    assert not missing["ok"] and "2 GEMM layers in cptsim, 3 GEMM nodes" in missing["msg"]
    # renamed layers pair in order and pass when equal
    assert check_corpus.compare_macs([("x", 10), ("y", 20), ("c", 30)], ref)["ok"]
    off = check_corpus.compare_macs([("x", 11), ("y", 20), ("c", 30)], ref)
    assert not off["ok"] and "total 61 vs 60" in off["msg"]


def test_count_follows_the_rules_on_a_hand_built_graph(tmp_path):
    """Grouped conv, Gemm with transB, a batched MatMul of two activations and an LSTM, each
    counted by hand: bias never counted, groups divide the input channels, LSTM 4 gates of
    (I + H) products per step."""
    rng = np.random.default_rng(0)
    w = lambda name, *dims: numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32),
                                                    name)
    b, t, i, h = 2, 5, 8, 6
    nodes = [
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", group=2,
                         pads=[1, 1, 1, 1]),                       # [2, 4, 6, 6]
        helper.make_node("Flatten", ["c"], ["f"], name="flat"),    # [2, 144]
        helper.make_node("Gemm", ["f", "gw", "gb"], ["g"], name="fc", transB=1),  # [2, 40]
        helper.make_node("Reshape", ["g", "s"], ["r"], name="r"),  # [2, 5, 8]
        helper.make_node("Transpose", ["r"], ["rt"], name="rt", perm=[0, 2, 1]),  # [2, 8, 5]
        helper.make_node("MatMul", ["r", "rt"], ["att"], name="att"),  # [2, 5, 5]
        helper.make_node("Transpose", ["r"], ["seq"], name="tb", perm=[1, 0, 2]),  # [5, 2, 8]
        helper.make_node("LSTM", ["seq", "lw", "lr", "lb"], ["y"], name="lstm", hidden_size=h),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, 4, 6, 6])],
        [helper.make_tensor_value_info("att", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w("cw", 4, 2, 3, 3), w("cb", 4), w("gw", 40, 144), w("gb", 40),
         numpy_helper.from_array(np.array([b, t, i], np.int64), "s"),
         w("lw", 1, 4 * h, i), w("lr", 1, 4 * h, h), w("lb", 1, 8 * h)])
    path = tmp_path / "hand.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = rng.standard_normal([b, 4, 6, 6]).astype(np.float32)
    _, shapes = ort_macs.probe_run(path, {"x": x})
    got = {n: m for n, _, m in ort_macs.count_macs(path, shapes)}
    assert got == {
        "conv": b * 4 * 6 * 6 * (4 // 2) * 3 * 3,
        "fc": b * 40 * 144,
        "att": b * t * t * i,
        "lstm": t * b * 4 * h * (i + h),
    }


def test_gemms_on_constants_only_are_not_counted(tmp_path):
    # a table passed through a linear layer (Swin V2's relative-position MLP) folds at load
    rng = np.random.default_rng(3)
    w = lambda name, *dims: numpy_helper.from_array(
        rng.standard_normal(dims).astype(np.float32), name)
    nodes = [
        helper.make_node("MatMul", ["table", "mw"], ["bias"], name="mlp"),
        helper.make_node("Relu", ["bias"], ["rb"], name="relu"),
        helper.make_node("MatMul", ["x", "xw"], ["h"], name="fc"),
        helper.make_node("Add", ["h", "rb"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w("table", 2, 3), w("mw", 3, 5), w("xw", 4, 5)])
    path = tmp_path / "folded.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    x = rng.standard_normal([2, 4]).astype(np.float32)
    _, shapes = ort_macs.probe_run(path, {"x": x})
    assert ort_macs.count_macs(path, shapes) == [("fc", "MatMul", 2 * 5 * 4)]


def test_regressions_name_only_cells_that_passed_before():
    ok, bad = {"ok": True, "msg": ""}, {"ok": False, "msg": "error: x"}
    row = lambda f, **cells: {"file": f, **{c: cells.get(c, ok) for c in check_corpus.COLUMNS}}
    before = [row("a", train=bad), row("b")]
    after = [row("a"), row("b", forward=bad), row("c", imports=bad)]
    assert check_corpus.regressions(before, after) == ["b forward: error: x"]


def advising_cptsim(tmp):
    """A `train` that needs both pieces of its advice: from seeded weights it warns of the
    missing normalization and stays at 6.9; with --init lsuv at lr 0.1 its loss climbs and it
    names a lower lr; with both it learns. Each call's flags go to `calls.txt`."""
    script = tmp / "advising-cptsim"
    script.write_text(f"""#!{sys.executable}
import sys
args = sys.argv[1:]
open({str(tmp / "calls.txt")!r}, "a").write(" ".join(args) + "\\n")
lr = args[args.index("--lr") + 1]
if "lsuv" not in args:
    sys.stderr.write("warning: ... --init lsuv scales each conv and linear layer to unit\\n")
    first, last = 6.9, 6.9
elif lr == "0.1":
    sys.stderr.write("warning: the training loss rose to 400 at iteration 6, 57x its 7 at the "
                     "start: at --lr 0.1 the steps overshoot on this network; try --lr 3.333e-2\\n")
    first, last = 7.0, 400.0
else:
    first, last = 7.0, 0.01
sys.stderr.write(f"iter 1/10  loss {{first}}  train acc 0.0%\\niter 10/10  loss {{last}}  x\\n")
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_train_follows_the_init_and_then_the_lr_advice(tmp_path):
    cptsim = binary()
    manifest = zoo_corpus(tmp_path, cptsim)
    fake = advising_cptsim(tmp_path)
    fc = check_corpus.FileCheck(args_for(fake, tmp_path), manifest["resnet20"], tmp_path)
    c = fc.train()
    assert c["ok"], c["msg"]
    assert c["msg"].startswith("loss 7 → 0.01 (at --lr 3.333e-2, as train's warning advises; "
                               "at 0.1: loss 7 → 400"), c["msg"]
    assert "(with --init lsuv, as train's warning advises; without: loss 6.9 → 6.9" in c["msg"]
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 3
    assert calls[2].endswith("--lr 3.333e-2 --clip-grad 2 --data synthetic --subset 2 "
                             "--test-subset 8 --init lsuv")


def test_weights_left_all_zero_are_drawn_and_others_kept():
    torch = pytest.importorskip("torch")
    import corpus_models

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    torch.nn.init.zeros_(model[1].weight)
    kept = model[0].weight.detach().clone()
    corpus_models.draw_zero_weights(model)
    assert torch.equal(model[0].weight, kept)
    assert model[1].weight.abs().min() > 0
    assert model(torch.ones(1, 4)).abs().max() > 0
