"""The connector registry: install hints for missing libraries, never for our own defects."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import connectors.registry
from connectors.registry import connector_class
from uda.errors import UnknownConnectorError, UserError


def _module(monkeypatch: pytest.MonkeyPatch, folder: Path, name: str, source: str) -> None:
    """A connector module that runs `source` when imported."""
    (folder / f"{name}.py").write_text(source + "\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_a_missing_third_party_library_gets_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _module(monkeypatch, tmp_path, "uda_test_needs_lib", "import some_absent_library_xyz")
    monkeypatch.setitem(
        connectors.registry.BUILTIN, "needs-lib", ("uda_test_needs_lib:C", "pip install xyz")
    )
    with pytest.raises(UserError, match=r"some_absent_library_xyz\): pip install xyz") as caught:
        connector_class("needs-lib")
    assert caught.value.field == "connector"


@pytest.mark.parametrize(
    "source",
    [
        "from connectors.contract.system_of_record import no_such_name",  # a name: a defect
        "import connectors.no_such_module",  # our own module: a broken install
    ],
)
def test_an_import_error_of_our_own_is_raised_as_itself(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str
) -> None:
    _module(monkeypatch, tmp_path, "uda_test_broken", source)
    monkeypatch.setitem(
        connectors.registry.BUILTIN, "broken", ("uda_test_broken:C", "pip install nothing")
    )
    with pytest.raises(ImportError) as caught:
        connector_class("broken")
    assert not isinstance(caught.value, UserError)


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownConnectorError, match=r"known: .*chroma"):
        connector_class("no-such-connector")
