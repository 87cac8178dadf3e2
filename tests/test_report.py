"""`babeleval report` on committed real runs (multilingual-e5 and SmolLM2 on Tatoeba side by
side; SmolLM2 5-shot SIB-200 under three choice orders with SmolLM2/Gemma 3 fertility):
the Markdown holds the runs' own numbers, and report.html, rendered in headless Chromium,
shows its tables and its charts (coloured bars on the screenshot, not a blank page or
broken images). Bad input to the report is one line and exit code 2."""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from babeleval.cli.main import cli

EXAMPLES = Path(__file__).parents[1] / "examples"
RUNS = [EXAMPLES / "sib200-milu-5shot-smollm2", EXAMPLES / "miners-e5", EXAMPLES / "miners-smollm2"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", "--hide-scrollbars"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = CliRunner().invoke(cli, ["report", *map(str, RUNS), "--fertility",
                                      str(EXAMPLES / "fertility-sib200" / "fertility.json"), "--output", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_markdown_holds_the_runs_numbers(report):
    md = (report / "report.md").read_text(encoding="utf-8")
    e5 = json.loads((RUNS[1] / "results.json").read_text())["tasks"]["tatoeba"]
    milu = json.loads((RUNS[0] / "results.json").read_text())["tasks"]["sib200-milu"]
    assert f"| ara | ar | Arab | {e5['subsets']['ara']['f1']:.3f} | 0.001 |" in md  # two models side by side
    hin = milu["subsets"]["hin_Deva"]
    assert f"| hin_Deva | hin | Deva | {hin['acc']:.3f} ± {hin['acc_stderr']:.3f} |" in md
    last = milu["axes"]["order"]["values"]["gold-last"]
    assert f"| gold-last | {last['acc']:.3f} ± {last['acc_stderr']:.3f} |" in md and last["acc"] == pytest.approx(0.4)
    assert "| spread (max - min) | 0.300 |" in md  # choice-order sensitivity
    assert "| consistency | 0.567 |" in md
    fertility = json.loads((EXAMPLES / "fertility-sib200" / "fertility.json").read_text())["tokenizers"]
    assert f"{fertility['smollm2']['languages']['hin_Deva']['fertility']:.2f} / " in md  # tokens per word beside acc
    assert "\n### direction (f1)\n" in md  # bitext per direction
    images = re.findall(r"!\[[^]]*\]\((figures/[^)]+\.png)\)", md)
    assert len(images) >= 8 and all((report / i).stat().st_size > 5000 and (report / i).with_suffix(".svg").exists()
                                    for i in images)


needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("BABELEVAL_REQUIRE_BROWSER"),
                                    reason="Debian's chromium is not installed (apt-get install chromium)")


def in_chromium(page: Path, tmp_path: Path, height: int):
    """(the DOM headless Chromium built from page, the screenshot's RGB pixels 1200 x height)."""
    assert CHROMIUM, "BABELEVAL_REQUIRE_BROWSER is set but chromium is not installed"
    import matplotlib.image

    flags = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--window-size=1200,{height}", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)
    return dom, (matplotlib.image.imread(shot)[..., :3] * 255).astype(int)


@pytest.mark.full  # the browser checks
@needs_chromium
def test_html_renders_in_headless_chromium(report, tmp_path):
    dom, pixels = in_chromium(report / "report.html", tmp_path, 2400)
    html = (report / "report.html").read_text(encoding="utf-8")
    assert dom.count("<table") == html.count("<table") >= 10 and dom.count("<img") == html.count("<img") >= 8
    assert pixels.shape[:2] == (2400, 1200)
    assert (pixels.min(axis=2) < 200).mean() > 0.03  # text, rules and bars: not a blank page
    blue = np.abs(pixels - [31, 119, 180]).max(axis=2) < 12  # matplotlib's first bar colour: the charts loaded
    assert blue.sum() > 5000


def test_report_bad_input_is_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "results.json").write_text((RUNS[0] / "results.json").read_text()[:500])
    for args, message in (([empty], f"{empty}/results.json: no such file"),
                          ([cut], f"{cut}/results.json:"),
                          ([RUNS[0], "--fertility", RUNS[0] / "results.json"], "not a fertility.json"),
                          ([], "give one or more run folders")):
        result = CliRunner().invoke(cli, ["report", *map(str, args), "--output", str(tmp_path / "out")])
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output
