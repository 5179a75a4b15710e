"""Check the built distributions against the files git tracks.

Usage: ``python .ci/check_dist.py DIST_DIR`` from the repository root, after
``python -m build --outdir DIST_DIR`` (which builds the wheel from the sdist,
so a file missing from the sdist is missing from the wheel too).

Fails (exit status 1, one line per difference) when
- the wheel's ``skl_nw/`` differs from ``git ls-files skl_nw`` (a module added
  to the source tree but left out of the wheel, or a stray file shipped);
- the sdist differs from the tracked files it is meant to hold (MANIFEST.in);
- the sdist, unpacked and built again, gives another file list.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

# What the sdist holds: these files and everything tracked under these folders.
SDIST_FILES = {"CHANGELOG.md", "LICENSE", "MANIFEST.in", "README.md", "conftest.py",
               "pyproject.toml"}  # fmt: skip
SDIST_DIRS = ("benchmarks/", "docs/", "examples/", "skl_nw/", "tests/")
# What setuptools adds to every sdist.
SDIST_GENERATED = ("PKG-INFO", "setup.cfg", "skl_nw.egg-info/", "skl_nw.egg-info")


def tracked() -> set[str]:
    """Files git tracks in the working copy, as repository-relative paths."""
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True)
    return set(out.stdout.splitlines())


def wheel_files(wheel: Path) -> set[str]:
    """List the package files of a wheel (its dist-info left out)."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")
        }


def sdist_files(sdist: Path) -> set[str]:
    """List the files of an sdist, relative to its top folder, setuptools' own left out."""
    with tarfile.open(sdist) as archive:
        names = {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile()}
    return {name for name in names if not name.startswith(SDIST_GENERATED)}


def rebuilt_sdist_files(sdist: Path) -> set[str]:
    """Unpack the sdist, build an sdist from it, and list that one's files."""
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist) as archive:
            archive.extractall(tmp, filter="data")
        (source,) = Path(tmp).iterdir()
        out = Path(tmp) / "out"
        build = [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(source)]
        subprocess.run(build, check=True, capture_output=True)
        (again,) = out.glob("*.tar.gz")
        return sdist_files(again)


def differences(label: str, built: set[str], expected: set[str]) -> list[str]:
    """One line per file that is in one list and not in the other."""
    lines = [f"{label}: missing {name}" for name in sorted(expected - built)]
    return lines + [
        f"{label}: not tracked by git, yet shipped: {name}" for name in sorted(built - expected)
    ]


def main(dist: Path) -> int:
    """Run every check; print the differences; 0 when there are none."""
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    files = tracked()
    package = {name for name in files if name.startswith("skl_nw/")}
    wanted = {name for name in files if name in SDIST_FILES or name.startswith(SDIST_DIRS)}
    shipped = sdist_files(sdist)
    problems = differences(f"wheel {wheel.name}", wheel_files(wheel), package)
    problems += differences(f"sdist {sdist.name}", shipped, wanted)
    problems += differences("sdist built again from the sdist", rebuilt_sdist_files(sdist), shipped)
    for line in problems:
        print(line)
    if not problems:
        print(f"{wheel.name}: {len(package)} package files; {sdist.name}: {len(shipped)} files, "
              "the same when built again")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
