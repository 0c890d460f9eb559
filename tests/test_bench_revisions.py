"""`benchmarks.revisions`: two revisions measured in turns, summarised and compared."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pytest

from benchmarks import revisions
from benchmarks.datasets import PROJECT_ROOT


def _turn(wall: float, phase1: float) -> dict[str, dict[str, float]]:
    return {"2": {"wall": wall, "phase1": phase1}, "1": {"wall": wall - 2, "phase1": phase1}}


def test_a_revision_is_the_median_of_its_turns_with_their_range() -> None:
    summary = revisions.summarise([_turn(20.0, 8.0), _turn(30.0, 9.0), _turn(22.0, 7.0)])
    assert summary["2"]["wall"] == {"median_ms": 22.0, "min_ms": 20.0, "max_ms": 30.0}
    assert summary["1"]["wall"]["median_ms"] == 20.0
    assert summary["2"]["phase1"]["median_ms"] == 8.0


def test_the_ratio_is_after_over_before_for_the_figures_both_have() -> None:
    before = revisions.summarise([_turn(20.0, 8.0)])
    after = revisions.summarise([{"2": {"wall": 22.0}, "1": {"wall": 17.0}}])
    ratio = revisions.compare(before, after)
    assert ratio["2"] == {"wall": pytest.approx(1.1)}
    assert ratio["1"] == {"wall": pytest.approx(17.0 / 18.0)}


def test_paired_ratios_are_taken_within_each_turn() -> None:
    # The machine slowed down in the second turn: both revisions felt it alike.
    before = [_turn(20.0, 8.0), _turn(40.0, 16.0)]
    after = [_turn(22.0, 8.0), _turn(44.0, 16.0)]
    ratios = revisions.paired(before, after)
    assert ratios["2"]["wall"] == pytest.approx(1.1)
    assert ratios["2"]["phase1"] == pytest.approx(1.0)
    assert ratios["1"]["wall"] == pytest.approx(statistics.median([20 / 18, 42 / 38]))


@pytest.mark.skipif(
    shutil.which("git") is None or not (PROJECT_ROOT / ".git").exists(),
    reason="needs the git CLI and a git checkout of the project",
)
@pytest.mark.parametrize("by_turn", [False, True], ids=["by-search", "by-turn"])
def test_two_revisions_are_built_and_measured_in_turns_and_their_checkouts_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], by_turn: bool
) -> None:
    before_worktrees = revisions._git("worktree", "list")
    out = tmp_path / "out"
    code = revisions.main(
        ["HEAD", "HEAD", "--chunks", "200", "--queries", "4", "--turns", "2", "--out", str(out)]
        + (["--by-turn"] if by_turn else [])
    )
    assert code == 0
    [written] = out.glob("*.json")
    report = json.loads(written.read_text())
    assert (
        report["before"]["commit"]
        == report["after"]["commit"]
        == revisions._git("rev-parse", "HEAD")
    )
    for side in ("before", "after"):
        assert len(report[side]["turns"]) == 2
        for depth in ("1", "2"):
            figures = report[side]["summary"][depth]
            assert figures["wall"]["median_ms"] > 0
            assert {"phase1", "phase3", "hydrate", "cpu"} <= figures.keys()
    assert set(report["ratio"]) == set(report["paired"]) == {"1", "2"}
    assert set(report["build_s"]) == {"before", "after"}
    assert all(seconds > 0 for seconds in report["build_s"].values())
    if by_turn:  # one process per revision and turn: no query was searched by both at once
        assert report["interleaved"] == "turn"
        assert report["per_search"] == {}
    else:
        assert report["interleaved"] == "search"
        assert set(report["per_search"]) == {"1", "2"}
        assert report["per_search"]["2"]["wall"] > 0
    assert (
        (out / written.name.replace(".json", ".md"))
        .read_text()
        .startswith("# Search latency in turns")
    )
    printed = capsys.readouterr().out
    assert "| 2 | wall |" in printed
    assert "Filling the store through `client.ingest`" in printed
    assert ("| paired | per search |" in printed) is not by_turn
    assert revisions._git("worktree", "list") == before_worktrees


def test_a_searcher_that_fails_is_an_error_naming_its_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout-x"
    checkout.mkdir()  # no project here: the turn script cannot import uda
    with pytest.raises(revisions.RevisionError, match="checkout-x"):
        revisions._Searcher(checkout, tmp_path / "store", 10, 1, "synthetic")


def test_an_unknown_revision_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shutil.which("git") is None or not (PROJECT_ROOT / ".git").exists():
        pytest.skip("needs the git CLI and a git checkout of the project")
    code = revisions.main(["no-such-revision-x", "HEAD", "--out", str(tmp_path)])
    assert code == 2
    assert "no-such-revision-x" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_counts_below_one_are_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        revisions.main(["HEAD", "HEAD", "--turns", "0"])
    assert exited.value.code == 2
    assert "--turns must be at least 1" in capsys.readouterr().err


def test_an_unknown_corpus_is_refused_naming_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        revisions.main(["HEAD", "HEAD", "--corpus", "novels"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "novels" in err
    assert "prose" in err
    assert "synthetic" in err
