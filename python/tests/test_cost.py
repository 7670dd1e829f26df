"""``cptsim.cost`` against ``cptsim run --format json``: the same document, every digit."""

import cptsim
import pytest


def test_a_zoo_model_costs_as_the_program_reports_it(cli):
    args = dict(schedule="cosine", bits="3:8", grad_bits="6:8", iters=400, batch=64, cycles=4)
    report = cptsim.cost("zoo:resnet20", accel=["zc706", "bitfusion", "eyeriss"], **args)
    expected = cli.json(
        "run", "--model", "zoo:resnet20", "--schedule", "cosine", "--bits", "3:8",
        "--grad-bits", "6:8", "--iters", 400, "--batch", 64, "--cycles", 4,
        "--accel", "zc706,bitfusion,eyeriss",
    )
    assert report.to_dict(breakdowns=False) == expected
    # the breakdown adds up to the totals
    for a in report.accelerators:
        layers = sum(r["totals"]["latency_s"] for r in a.per_layer_gemm)
        assert layers == pytest.approx(a.latency_s, rel=1e-9)
    rows = report.to_dicts()
    assert {r["accelerator"] for r in rows} == {"zc706", "bitfusion", "eyeriss"}
    assert {r["gemm"] for r in rows} >= {"forward"}


def test_hardware_accounting_and_a_policy_match_the_program(cli):
    report = cptsim.cost(
        "zoo:lenet5", schedule="linear-triangular", bits=4, grad_bits=8, iters=90, batch=32,
        cycles=3, policy="cifar", accounting="hardware",
    )
    expected = cli.json(
        "run", "--model", "zoo:lenet5", "--schedule", "linear-triangular", "--bits", 4,
        "--grad-bits", 8, "--iters", 90, "--batch", 32, "--cycles", 3, "--policy", "cifar",
        "--accounting", "hardware", "--accel", "none",
    )
    assert report.to_dict() == expected
    assert report.bn_gops is not None


def test_an_edited_accelerator_costs_as_its_toml_file_does(cli, tmp_path):
    cfg = cptsim.accel.load("zc706").replace(rows=32, efficiency=0.8)
    assert cfg.to_dict()["array"]["rows"] == 32
    path = tmp_path / "zc706-32.toml"
    path.write_text(cfg.to_toml())
    ours = cptsim.cost("zoo:lenet5", iters=40, cycles=2, accel=["zc706", cfg])
    theirs = cli.json(
        "run", "--model", "zoo:lenet5", "--iters", 40, "--cycles", 2,
        "--accel", f"zc706,{path}",
    )
    a, b = ours.to_dict(breakdowns=False), theirs
    # a repeated name is labelled with where the copy came from: here the edit, there the file
    assert a["accelerators"][1]["name"] == f"zc706 ({cfg.origin})"
    assert b["accelerators"][1]["name"] == f"zc706 ({path})"
    for d in (a, b):
        d["accelerators"][1]["name"] = "edited"
    assert a == b
    assert ours.accelerators[1].latency_s > ours.accelerators[0].latency_s


def test_bad_accelerator_edits_are_usage_errors():
    cfg = cptsim.accel.load("zc706")
    with pytest.raises(cptsim.UsageError, match="no key `nosuch`"):
        cfg.replace(nosuch=1)
    with pytest.raises(cptsim.UsageError, match="rows"):
        cfg.replace(rows=0)
    with pytest.raises(cptsim.UsageError, match="nosuch-accel"):
        cptsim.accel.load("nosuch-accel")
    assert "zc706" in cptsim.accel.builtins()


def test_without_breakdowns_the_totals_are_the_same():
    full = cptsim.cost("zoo:lenet5", iters=40, cycles=2, accel=["zc706"], epoch_iters=10)
    assert len(full.accelerators[0].per_epoch) == 4
    plain = cptsim.cost("zoo:lenet5", iters=40, cycles=2, accel=["zc706"], epoch_iters=None)
    assert plain.to_dict() == full.to_dict(breakdowns=False)
    assert plain.to_dicts() == []
