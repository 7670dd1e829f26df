"""Traces built in Python: they round-trip through both formats and cost as the program costs
the file."""

import cptsim
import pytest

MODEL = "zoo:lenet5"


def built_trace():
    """A DFQ-like trace: layer 1 splits its 32 samples over two precisions in the second span,
    the last layer is left out (fp32)."""
    rows = []
    for start, end, fw in [(0, 10, 4), (10, 25, 6), (25, 30, 8)]:
        for layer in range(4):
            if layer == 1 and fw == 6:
                rows.append((start, end, "conv2", 6, 6, 8, 20))
                rows.append((start, end, "conv2", 3, 4, 8, 12))
            else:
                rows.append((start, end, layer, fw, fw, 8, 32))
    return cptsim.Trace.from_arrays(MODEL, *zip(*rows))


def test_a_built_trace_round_trips_through_csv_and_pb(tmp_path):
    trace = built_trace()
    assert (trace.iterations, trace.batch, len(trace)) == (30, 32, 13)
    for name in ("t.csv", "t.pb"):
        path = tmp_path / name
        assert trace.write(path) == len(trace)
        back = cptsim.Trace.read(path, MODEL)
        assert back == trace, name
    cols = trace.columns()
    assert cols["layer_name"][1] == "conv2"
    assert cols["b_w"][:2] == [4, 4]


def test_a_built_trace_costs_as_the_program_costs_its_file(cli, tmp_path):
    trace = built_trace()
    for name in ("t.csv", "t.pb"):
        path = tmp_path / name
        trace.write(path)
        expected = cli.json("run", "--model", MODEL, "--trace", path, "--accel", "zc706,stripes")
        assert cptsim.cost(MODEL, trace=trace, accel=["zc706", "stripes"]).to_dict(
            breakdowns=False
        ) == expected, name
        assert cptsim.cost(MODEL, trace=str(path), accel=["zc706", "stripes"]).to_dict(
            breakdowns=False
        ) == expected, name
    # the baseline from given bits, as --bits/--grad-bits do
    expected = cli.json("run", "--model", MODEL, "--trace", path, "--bits", "2:16", "--accel", "none")
    assert cptsim.cost(MODEL, trace=trace, bits="2:16").to_dict() == expected | {
        "schedule": f"trace:{path}"
    }


def test_a_trace_with_a_gap_is_bad_input_naming_the_problem():
    with pytest.raises(cptsim.BadInputError, match="Trace.from_arrays"):
        cptsim.Trace.from_arrays(MODEL, [0, 6], [5, 10], [0, 0], [4, 4], [4, 4], [8, 8], [32, 32])
    with pytest.raises(cptsim.UsageError, match="layer 'nosuch'"):
        cptsim.Trace.from_arrays(MODEL, [0], [5], ["nosuch"], [4], [4], [8], [32])
    with pytest.raises(cptsim.UsageError, match="different lengths"):
        cptsim.Trace.from_arrays(MODEL, [0], [5, 6], [0], [4], [4], [8], [32])
    with pytest.raises(cptsim.UsageError, match="b_w -1"):
        cptsim.Trace.from_arrays(MODEL, [0], [5], [0], [-1], [4], [8], [32])


def test_a_trace_of_another_model_is_bad_input(tmp_path):
    path = tmp_path / "t.csv"
    built_trace().write(path)
    with pytest.raises(cptsim.BadInputError, match="t.csv"):
        cptsim.Trace.read(path, "zoo:resnet20")
    with pytest.raises(cptsim.BadInputError):
        cptsim.cost("zoo:resnet20", trace=built_trace())
