"""Aggregation over records that carry their subset and axis values: per subset, per axis
value, the spread of the main metric and the consistency of the chosen option."""
import pytest

from babeleval.results import consistency, summarise, write_json_atomic
from babeleval.tasks.multiple_choice import mean_metrics


def record(subset, order, doc, acc, chosen):
    return {"key": f"{subset}|order={order}", "subset": subset, "variant": {"order": order}, "id": doc, "acc": acc,
            "chosen": chosen}


RECORDS = [record("sw", "original", "1", 1.0, "a"), record("sw", "original", "2", 0.0, "b"),
           record("sw", "gold-first", "1", 1.0, "a"), record("sw", "gold-first", "2", 1.0, "c"),
           record("ta", "original", "1", 0.0, "x"), record("ta", "gold-first", "1", 0.0, "x")]


def test_spread_consistency_and_groups():
    out = summarise(RECORDS, lambda rs: mean_metrics(rs, ["acc"]), "acc", {"order": ["original", "gold-first"]})
    assert out["main_score"] == pytest.approx(0.5) and out["metrics"]["n"] == 6
    assert out["subsets"]["sw"]["acc"] == 0.75 and out["subsets"]["ta"]["acc"] == 0.0
    order = out["axes"]["order"]
    assert order["values"]["original"]["acc"] == pytest.approx(1 / 3)
    assert order["values"]["gold-first"]["acc"] == pytest.approx(2 / 3)
    assert order["spread"] == pytest.approx(1 / 3)
    assert order["per_subset_spread"] == {"sw": 0.5, "ta": 0.0}
    assert order["consistency"] == pytest.approx(2 / 3)  # sw-1 (a, a) and ta-1 (x, x) agree; sw-2 (b, c) does not
    assert out["variants"]["sw|order=gold-first"]["acc"] == 1.0


def test_consistency_needs_chosen_options_and_stderr_is_the_mean_s():
    assert consistency([{**r, "chosen": None} for r in RECORDS][:0], "order") is None
    m = mean_metrics([{"acc": 1.0}, {"acc": 0.0}, {"acc": 1.0}, {"acc": 0.0}], ["acc"])
    assert m["acc"] == 0.5 and m["acc_stderr"] == pytest.approx((1 / 3) ** 0.5 / 2)  # sqrt(var ddof=1 / n)


def test_results_are_written_atomically(tmp_path):
    path = write_json_atomic(tmp_path / "results.json", {"a": 1})
    assert path.stat().st_mode & 0o044 == 0o044  # readable by others, like any file the run writes
    assert path.read_text() == '{\n "a": 1\n}' and [p.name for p in tmp_path.iterdir()] == ["results.json"]
    with pytest.raises(TypeError):
        write_json_atomic(tmp_path / "results.json", {"a": object()})
    assert path.read_text() == '{\n "a": 1\n}' and [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_axis_groups_and_tables_of_two_axes():
    records = []
    for subset in ("amh", "tir"):
        for prompt in ("english", "native"):
            for order in ("1", "2", "4"):
                acc = float(prompt == "native") if order != "4" else 1.0
                records.append({"key": f"{subset}|{prompt}|{order}", "subset": subset, "id": "0", "acc": acc,
                                "variant": {"prompt_language": prompt, "order": order}})
    out = summarise(records, lambda rs: mean_metrics(rs, ["acc"]), "acc",
                    {"prompt_language": ["english", "native"], "order": ["1", "2", "4"]},
                    axis_groups={"order": {"random": ["1", "2"], "all A": ["4"]}})
    assert out["axes"]["order"]["groups"]["random"]["acc"] == 0.5 and out["axes"]["order"]["groups"]["all A"]["acc"] == 1.0
    table = out["tables"]["prompt_language x order"]
    assert table["all"]["english"] == {"1": 0.0, "2": 0.0, "4": 1.0} and table["amh"]["native"]["1"] == 1.0


def test_summary_lines_print_the_order_table():
    from babeleval.results import summary_lines

    out = summarise(RECORDS, lambda rs: mean_metrics(rs, ["acc"]), "acc", {"order": ["original", "gold-first"]})
    lines = summary_lines("xcopa", {**out, "main_metric": "acc"})
    assert lines[0] == "xcopa: acc 0.500  n=6" and lines[1] == "  acc by subset: sw 0.750  ta 0.000"
    assert lines[2] == "  order: original 0.333  gold-first 0.667  spread 0.333  consistency 0.667"


def test_summary_lines_print_two_axis_tables():
    from babeleval.results import summary_lines

    records = [{"key": f"sw|{p}|{c}", "subset": "sw", "id": "0", "acc": float(p == c), "variant": {"prompt": p, "choices": c}}
               for p in ("english", "native") for c in ("english", "native")]
    out = summarise(records, lambda rs: mean_metrics(rs, ["acc"]), "acc", {"prompt": ["english", "native"],
                                                                           "choices": ["english", "native"]})
    lines = summary_lines("t", {**out, "main_metric": "acc"})
    assert lines[-4] == "  prompt x choices (acc):" and lines[-3].split() == ["english", "native"]
    assert lines[-2].split() == ["english", "1.000", "0.000"] and lines[-1].split() == ["native", "0.000", "1.000"]
