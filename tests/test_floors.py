"""The dependency floors: each runtime dependency has one ``>=`` floor, which the minimum-versions
run of ``.ci/run`` installs exactly (``.ci/floors.py``); the floors cover what the code calls."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("floors", REPO / ".ci" / "floors.py")
floors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(floors)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_every_dependency_is_pinned_at_its_floor():
    """One ``name==floor`` per ``[project]`` dependency, in order, floors as written."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = floors.floors(str(REPO / "pyproject.toml"))
    assert [p.split("==")[0] for p in pins] == [d.split(">=")[0] for d in deps]
    assert [p.split("==")[1] for p in pins] == [d.split(">=")[1] for d in deps]


def test_floors_cover_the_apis_used():
    """Streamlit >= 1.67 (``st.echarts_chart`` and widgets' ``bind=``)."""
    pins = dict(p.split("==") for p in floors.floors(str(REPO / "pyproject.toml")))
    assert _version(pins["streamlit"]) >= (1, 67)


def test_a_dependency_without_a_floor_is_refused(tmp_path):
    """``name``, ``name<2`` or ``name>=1,<2`` is an error naming it; extras are kept off."""
    for dep in ("numpy", "numpy<2", "numpy>=1,<2"):
        (tmp_path / "pyproject.toml").write_text(f'[project]\ndependencies = ["{dep}"]\n')
        with pytest.raises(SystemExit, match="numpy"):
            floors.floors(str(tmp_path / "pyproject.toml"))
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["moto[server]>=5.0"]\n')
    assert floors.floors(str(tmp_path / "pyproject.toml")) == ["moto==5.0"]
