"""``cptsim.inspect`` against ``cptsim inspect --format json``."""

import cptsim


def test_layers_and_totals_match_the_program(cli):
    for model, batch in [("zoo:resnet20", 16), ("zoo:mobilenetv2", 2)]:
        ours = cptsim.inspect(model, batch=batch)
        theirs = cli.json("inspect", model, "--batch", batch)
        assert ours.name == theirs["model"]
        assert [l.name for l in ours.layers] == [l["name"] for l in theirs["layers"]]
        for mine, other in zip(ours.layers, theirs["layers"]):
            assert (mine.op, mine.macs, mine.params, mine.groups) == (
                other["op"], other["macs"], other["params"], other["groups"],
            )
            g = other["gemm"]
            assert (mine.gemm_groups, mine.m, mine.n, mine.k, mine.batch_macs) == (
                g["groups"], g["m"], g["n"], g["k"], g["macs"],
            )
        for key in ("macs", "bn_elements", "ops_per_image", "params"):
            assert ours.totals[key] == theirs["totals"][key], key
    assert len(ours.to_dicts()) == len(ours.layers)
