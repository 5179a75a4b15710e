import subprocess
import sys
from pathlib import Path

import pytest

import skl_nw
from skl_nw.__main__ import main
from skl_nw._kernels import kernel_names

ROOT = Path(__file__).resolve().parents[2]
ERROR = "python -m skl_nw demo: error: argument "


@pytest.mark.parametrize(
    "argv",
    [
        ["--bandwidth=-1"],
        ["--bandwidth", "-1"],
        ["--bandwidth", "0"],
        ["--bandwidth", "nan"],
        ["--bandwidth", "inf"],
        ["--bandwidth=-inf"],
        ["--bandwidth", "1e400"],
        ["--bandwidth", "wide"],
        ["--bandwidth", ""],
    ],
)
def test_bad_bandwidth_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["demo", *argv])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""  # rejected before any work: no table
    lines = err.strip().splitlines()
    assert lines[0].startswith("usage: python -m skl_nw demo")
    assert len(lines) == 2
    assert lines[1].startswith(ERROR + "--bandwidth: must be a positive finite number")
    assert "'scott', 'silverman'" in lines[1]


@pytest.mark.parametrize("make_out", ["file", "under_file", "empty"])
def test_bad_out_is_a_usage_error(make_out, tmp_path, capsys):
    file = tmp_path / "file.txt"
    file.write_text("not a folder")
    out_arg = {"file": str(file), "under_file": str(file / "figs"), "empty": ""}[make_out]
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--out", out_arg])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.strip().splitlines()[-1].startswith(ERROR + "--out: ")
    assert not (file / "figs").exists()


def test_bad_option_from_the_shell_has_no_traceback():
    # The command, end to end: argparse's two lines, status 2.
    result = subprocess.run(
        [sys.executable, "-m", "skl_nw", "demo", "--bandwidth=-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2
    assert lines[1].startswith(ERROR + "--bandwidth: ")


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"skl_nw {skl_nw.__version__}\n"


@pytest.mark.parametrize(("bandwidth", "shown"), [(None, None), ("0.3", "0.300")])
def test_demo_prints_every_kernel_and_writes_both_figures(bandwidth, shown, tmp_path, capsys):
    out_dir = tmp_path / "new" / "figs"  # created by the demo
    argv = ["demo", "--out", str(out_dir)]
    if bandwidth is not None:
        argv += ["--bandwidth", bandwidth]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("Nadaraya–Watson, ")]
    assert [row.split()[1] for row in rows] == kernel_names()
    assert any(line.startswith("average pooling") for line in out.splitlines())
    if shown is not None:
        assert all(row.split()[2] == shown for row in rows)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in out
        return
    for name in ("predictions.png", "attention_weights.png"):
        png = out_dir / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000
