"""Errors are exceptions under ``cptsim.Error`` of the class the program's exit code says."""

import cptsim
import pytest

CLASSES = {
    2: cptsim.UsageError,
    3: cptsim.BadInputError,
    4: cptsim.RuntimeFailure,
    5: cptsim.DivergedError,
}


def test_the_classes_carry_the_programs_exit_codes():
    for code, cls in CLASSES.items():
        assert issubclass(cls, cptsim.Error) and cls.exit_code == code


@pytest.mark.parametrize("content", [None, b"not an ONNX model", b""])
def test_a_bad_model_path_raises_the_class_of_the_programs_exit_code(cli, tmp_path, content):
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    code = cli.run("run", "--model", path, "--iters", 100, check=False).returncode
    assert code in (2, 3)
    with pytest.raises(CLASSES[code]) as raised:
        cptsim.cost(str(path), iters=100)
    assert str(path) in str(raised.value)
    with pytest.raises(CLASSES[code]):
        cptsim.inspect(str(path))


def test_a_malformed_file_is_bad_input_and_a_missing_one_usage(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    with pytest.raises(cptsim.BadInputError, match="bad.onnx"):
        cptsim.cost(str(bad))
    with pytest.raises(cptsim.UsageError, match="missing.onnx"):
        cptsim.cost(str(tmp_path / "missing.onnx"))


def test_bad_arguments_are_usage_errors_naming_them():
    with pytest.raises(cptsim.UsageError, match="zoo:nosuch"):
        cptsim.inspect("zoo:nosuch")
    with pytest.raises(cptsim.UsageError, match="bits"):
        cptsim.cost("zoo:lenet5", bits="9:3")
    with pytest.raises(cptsim.UsageError, match="batch"):
        cptsim.cost("zoo:lenet5", batch=0)
    with pytest.raises(cptsim.UsageError, match="policy"):
        cptsim.cost("zoo:lenet5", policy="some")
    with pytest.raises(cptsim.UsageError, match="trace format"):
        cptsim.cost("zoo:lenet5", trace="run.txt")


def test_a_trace_with_run_arguments_is_a_usage_error(tmp_path):
    with pytest.raises(cptsim.UsageError, match="iters: a trace carries its own"):
        cptsim.cost("zoo:lenet5", trace=str(tmp_path / "t.csv"), iters=10)
