"""benchmarks/json_rows: the probe modes' shared command line, and the suites' modes found by module."""

import json

from benchmarks import anatomy, json_rows, latency, library
from benchmarks.json_rows import Option, comma_list, rows_main


def test_options_are_read_by_their_defaults_type_and_rows_written(tmp_path, capsys):
    seen = {}

    def run(reps, sizes, only, small, where):
        seen.update(reps=reps, sizes=sizes, only=only, small=small, where=where)
        return [json_rows.emit({"reps": reps})]

    out = tmp_path / "rows.json"
    rows = rows_main(run, "a mode", ["--reps", "3", "--sizes", "1,2", "--small", "--json", str(out), "here"],
                     summary=lambda rows: [f"{len(rows)} row"], reps=10,
                     sizes=Option([4], "comma-separated", comma_list(int)), only=Option(None, "regex"),
                     small=Option(False, "smaller"), where=Option("there", positional=True))
    assert seen == {"reps": 3, "sizes": [1, 2], "only": None, "small": True, "where": "here"}
    assert rows == [{"reps": 3}] and json.loads(out.read_text()) == rows
    assert capsys.readouterr().out.splitlines() == ['{"reps": 3}', "1 row"]


def test_a_mode_taking_cuda_context_is_given_it_instead_of_a_context():
    got = []
    rows_main(lambda cuda_context: got.append(cuda_context) or [], "a mode of several processes",
              ["--cuda-context"])
    assert got == [True]


def test_every_module_of_a_suite_is_a_mode():
    assert list(json_rows.modes(latency)) == ["call-cost", "clock", "eager-breakdown", "eager-launch-ab",
                                              "eager-overhead", "first-dispatch", "sync-cost", "sync-latency",
                                              "sync-spin", "toggles", "web-vs-python"]
    assert list(json_rows.modes(library)) == ["bandwidth", "gemv", "matmul", "quant"]
    assert json_rows.modes(anatomy)["plan-memory"] == (
        "plan_memory", "Device memory of a plan or bundle by kind, measured on the CPU (nothing touches a "
                       "device)")
    assert json_rows.headline("One. Two.") == "One"
