"""``cptsim.train`` against ``cptsim train``: the same plan and seed give the same summary,
metrics and trace; a callback stops a run; bad plans raise the usage exception; figures are SVG."""

import csv
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

import cptsim
from conftest import REPO

# What differs between two runs of the same plan: how long they took.
TIMING = {"seconds", "images_per_s", "cpu_seconds", "images_per_cpu_s", "load_average"}


@pytest.fixture(scope="session")
def mnist():
    # As the Rust tests find it: $CPTSIM_DATA_DIR, else ../shared/data beside the repository.
    root = Path(os.environ.get("CPTSIM_DATA_DIR", REPO.parent / "shared" / "data"))
    found = root / "mnist"
    if not (found / "train-images-idx3-ubyte.gz").is_file():
        reason = f"{found} not found"
        if os.environ.get("CPTSIM_REQUIRE_DATA") == "1":
            pytest.fail(f"CPTSIM_REQUIRE_DATA=1 but {reason}")
        print(f"SKIPPED: test_train: {reason} (set CPTSIM_REQUIRE_DATA=1 to fail instead)", file=sys.stderr)
        pytest.skip(reason)
    return f"mnist:{found}"


def tiny(data, **keys):
    """LeNet-5 on a slice of MNIST for 12 iterations, evaluated every 4, on a CPT schedule."""
    plan = {
        "model": "zoo:lenet5",
        "data": data,
        "schedule": "cosine",
        "bits": "3:8",
        "cycles": 2,
        "iters": 12,
        "batch": 16,
        "subset": 512,
        "eval_every": 4,
        "lr": 0.05,
        "seed": 7,
    }
    plan.update(keys)
    return plan


def cli_args(plan):
    args = ["train"]
    for key, value in plan.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def read_metrics(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_train_equals_the_programs_run_to_the_last_digit(cli, mnist, tmp_path):
    plan = tiny(mnist)
    cli.run(*cli_args(plan), "--out", tmp_path / "cli")
    result = cptsim.train(dict(plan, out=str(tmp_path / "py")))
    theirs = json.loads((tmp_path / "cli" / "summary.json").read_text())
    mine = {k: v for k, v in result.summary.items() if k not in TIMING}
    assert mine == {k: v for k, v in theirs.items() if k not in TIMING}
    assert result.stopped is None and result.iteration == result.iterations == 12
    # The in-memory rows are the program's metrics.csv, digit for digit.
    rows = read_metrics(tmp_path / "cli" / "metrics.csv")
    assert [int(r["iteration"]) for r in rows] == [4, 8, 12]
    for got, want in zip(result.metrics.to_dicts(), rows):
        for col in ("train_loss", "train_acc", "test_loss", "test_acc"):
            assert f"{got[col]:.6f}" == want[col], col
        assert (got["fw_bits"], got["bw_bits"]) == (int(want["fw_bits"]), int(want["bw_bits"]))
    assert result.final_test_acc == theirs["final_test_acc"]
    # The outputs it wrote, and its trace, are the program's.
    for name in ("metrics.csv", "trace.csv", "trace.pb"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert result.trace == cptsim.Trace.read(tmp_path / "cli" / "trace.pb", "zoo:lenet5")
    assert result.trace.iterations == 12 and result.trace.batch == 16


def test_a_toml_plan_file_and_text_train_the_same_run(mnist, tmp_path):
    plan = tiny(mnist, iters=4, eval_every=4)
    text = "".join(f"{k} = {json.dumps(v)}\n" for k, v in plan.items())
    (tmp_path / "plan.toml").write_text(text)
    a = cptsim.train(tmp_path / "plan.toml")
    b = cptsim.train(text)
    assert a.metrics.to_dicts() == b.metrics.to_dicts() and len(a.metrics) == 1
    assert a.trace == b.trace
    assert a.summary["gbitops"] == b.summary["gbitops"]
    # On two threads of its own, the same run.
    c = cptsim.train(dict(plan, threads=2))
    assert c.metrics.to_dicts() == a.metrics.to_dicts() and c.trace == a.trace


def test_other_python_threads_run_while_it_trains():
    ticks, done = [], threading.Event()

    def count():
        while not done.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        started = time.monotonic()
        cptsim.train({"model": "zoo:lenet5", "data": "synthetic", "iters": 40, "batch": 32, "eval_every": 40})
        finished = time.monotonic()
    finally:
        done.set()
        counter.join()
    during = [t for t in ticks if started < t < finished]
    assert len(during) >= 10, f"{len(during)} ticks in {finished - started:.2f} s of training"


def test_a_callback_returning_false_stops_the_run_with_its_checkpoint(cli, mnist, tmp_path):
    seen = []

    def progress(step):
        seen.append(step)
        return step.iteration < 5

    out = tmp_path / "run"
    result = cptsim.train(tiny(mnist, out=str(out)), progress=progress)
    assert [s.iteration for s in seen] == [1, 2, 3, 4, 5]
    assert seen[0].iterations == 12 and seen[0].loss > 0 and seen[0].eval is None
    assert seen[3].eval is not None and seen[3].eval.iteration == 4
    assert result.summary is None and result.iteration == 5
    assert "interrupted at iteration 5/12" in result.stopped
    assert (out / "checkpoint.bin").is_file() and not (out / "summary.json").exists()
    assert [r["iteration"] for r in result.metrics.to_dicts()] == [4]
    assert result.trace is not None and result.trace.iterations == 5
    # Resumed, from Python or by the program, it finishes as the run that never stopped.
    again = tmp_path / "again"
    shutil.copytree(out, again)
    part = cptsim.train(resume=out, progress=lambda step: step.iteration < 9)
    assert "interrupted at iteration 9/12" in part.stopped
    # The evaluations of both invocations, and the trace from the start.
    assert [r["iteration"] for r in part.metrics.to_dicts()] == [4, 8]
    assert part.trace.iterations == 9 and part.trace.rows[0][0] == 0
    resumed = cptsim.train(resume=out)
    whole = cptsim.train(tiny(mnist))
    strip = lambda s: {k: v for k, v in s.items() if k not in TIMING}
    assert strip(resumed.summary) == strip(whole.summary)
    assert resumed.metrics.to_dicts() == whole.metrics.to_dicts() and resumed.trace == whole.trace
    cli.run("train", "--resume", again)
    assert strip(json.loads((again / "summary.json").read_text())) == strip(whole.summary)
    with pytest.raises(cptsim.UsageError, match="key 'lr': a resumed run keeps"):
        cptsim.train({"lr": 0.1}, resume=again)
    with pytest.raises(cptsim.UsageError, match="no checkpoint.bin"):
        cptsim.train(resume=tmp_path)


def test_ctrl_c_stops_the_run_keeps_its_checkpoint_and_raises_keyboard_interrupt(mnist, tmp_path):
    def progress(step):
        if step.iteration == 3:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C in a terminal or notebook sends

    out = tmp_path / "run"
    # Python's own Ctrl-C handler, also where the suite was started with SIGINT ignored (a
    # background job of a non-interactive shell), in which case Python installs none.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt, match="checkpoint written") as caught:
            cptsim.train(tiny(mnist, out=str(out)), progress=progress)
    finally:
        signal.signal(signal.SIGINT, before)
    assert "interrupted at iteration" in str(caught.value)
    assert (out / "checkpoint.bin").is_file() and not (out / "summary.json").exists()


def test_a_signal_handlers_own_exception_stops_the_run_and_is_raised(mnist):
    def handler(signum, frame):
        raise TimeoutError("time is up")

    def progress(step):
        if step.iteration == 2:
            os.kill(os.getpid(), signal.SIGUSR1)

    before = signal.signal(signal.SIGUSR1, handler)
    try:
        with pytest.raises(TimeoutError, match="time is up"):
            cptsim.train(tiny(mnist), progress=progress)
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_an_exception_in_the_callback_stops_the_run_and_is_raised(mnist):
    def progress(step):
        raise ValueError(f"stop at {step.iteration}")

    with pytest.raises(ValueError, match="stop at 1"):
        cptsim.train(tiny(mnist), progress=progress)


def test_bad_plans_raise_the_usage_exception_naming_the_key(tmp_path):
    with pytest.raises(cptsim.UsageError, match=r"unknown key 'modle' \(did you mean 'model'\?\)"):
        cptsim.train({"modle": "zoo:lenet5", "data": "synthetic"})
    with pytest.raises(cptsim.UsageError, match="key 'iters'"):
        cptsim.train({"model": "zoo:lenet5", "data": "synthetic", "iters": "many"})
    with pytest.raises(cptsim.UsageError, match="key 'batch'"):
        cptsim.train('model = "zoo:lenet5"\ndata = "synthetic"\nbatch = 0\n')
    with pytest.raises(cptsim.UsageError, match="no such file"):
        cptsim.train(tmp_path / "missing.toml")
    with pytest.raises(cptsim.UsageError, match="nosuch"):
        cptsim.train({"model": "zoo:nosuch", "data": "synthetic", "iters": 1})
    with pytest.raises(cptsim.UsageError, match="mnist"):
        cptsim.train({"model": "zoo:lenet5", "data": "mnist:/no/such/dir", "iters": 1})
    assert cptsim.UsageError.exit_code == 2 and cptsim.DivergedError.exit_code == 5


def test_a_diverging_run_raises_the_diverged_exception():
    plan = {"model": "zoo:lenet5", "data": "synthetic", "iters": 30, "batch": 8, "lr": 1e6, "max_loss": 50}
    with pytest.raises(cptsim.DivergedError):
        cptsim.train(plan)


def test_figures_are_svg_documents(tmp_path):
    trace = cptsim.Trace.from_arrays(
        "zoo:lenet5",
        iter_start=[0] * 5 + [10] * 5,
        iter_end=[10] * 5 + [20] * 5,
        layer=list(range(5)) * 2,
        b_w=[4] * 5 + [8] * 5,
        b_a=[4] * 5 + [8] * 5,
        b_g=[8] * 10,
        samples=[1280] * 10,
    )
    fig = trace.plot(operand="w", title="weights")
    svg = fig._repr_svg_()
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "weights" in svg
    fig.save(tmp_path / "trace.svg")
    assert (tmp_path / "trace.svg").read_text() == svg
    with pytest.raises(cptsim.UsageError, match=".svg"):
        fig.save(tmp_path / "trace.png")
    with pytest.raises(cptsim.UsageError, match="operand"):
        trace.plot(operand="x")
    with pytest.raises(cptsim.UsageError, match="width"):
        trace.plot(width=10)


def test_figures_are_the_programs_plots_byte_for_byte(cli, tmp_path):
    out = tmp_path / "run"
    plan = {"model": "zoo:lenet5", "data": "synthetic", "iters": 30, "batch": 16, "eval_every": 10,
            "schedule": "cosine", "bits": "3:8", "cycles": 2, "out": str(out)}
    result = cptsim.train(plan)
    assert len(result.metrics) == 3
    curves = result.plot()._repr_svg_()
    assert curves.lstrip().startswith("<svg") and "iteration" in curves
    # The program draws a run's curves from its metrics.csv (the bits from its trace.csv when
    # there is one, which the in-memory figure does not read).
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.csv").write_bytes((out / "metrics.csv").read_bytes())
    cli.run("plot", "curves", tmp_path / "metrics", "-o", tmp_path / "curves.svg")
    assert curves == (tmp_path / "curves.svg").read_text()
    heat = result.trace.plot(operand="w", bits="2:8", max_columns=7)._repr_svg_()
    cli.run("plot", "trace", out / "trace.pb", "--model", "zoo:lenet5", "--operand", "w",
            "--bits", "2:8", "--columns", "7", "-o", tmp_path / "trace.svg")
    assert heat == (tmp_path / "trace.svg").read_text()
    report = cptsim.cost("zoo:lenet5", trace=result.trace, accel=["zc706", "stripes"])
    cli.run("run", "--model", "zoo:lenet5", "--trace", out / "trace.pb", "--accel", "zc706",
            "--accel", "stripes", "--report", tmp_path / "report")
    for accel, split in (("zc706", "components"), ("stripes", "gemm")):
        bars = report.plot(accel, split=split)._repr_svg_()
        cli.run("plot", "breakdown", tmp_path / "report", "--accel", accel, "--split", split,
                "-o", tmp_path / f"{accel}.svg")
        assert bars == (tmp_path / f"{accel}.svg").read_text(), accel
    with pytest.raises(cptsim.UsageError, match="name the accelerator"):
        report.plot()
    with pytest.raises(cptsim.UsageError, match="split z"):
        report.plot("zc706", split="z")
    with pytest.raises(cptsim.UsageError, match="max_columns 0"):
        result.trace.plot(max_columns=0)
    with pytest.raises(cptsim.BadInputError, match="no evaluation"):
        cptsim.Metrics([], "empty").plot()
