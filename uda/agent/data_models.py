"""Arguments and answers of the discovery and export tools (`uda.agent.data_tools`).

Like every tool model: arguments are `extra="forbid"` and carry no clearance. The export
tool takes a plain file name, never a path: where files go is the deployment's choice.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from uda.query.discovery import MAX_LISTED_VALUES, MAX_PREFIX, FilterPath
from uda.query.export import DEFAULT_MAX_ROWS

FILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
"""What `export_query` takes as a file name: no folder, no dot, no extension."""


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DiscoverPathsArgs(_Args):
    """List the paths filters may name."""

    prefix: str | None = Field(
        default=None,
        max_length=MAX_PREFIX,
        description='Only paths starting with this: "status", "partOf." (what an element is '
        'part of), "~governedBy." (what a decision governs). Default: every path.',
    )
    values: bool = Field(
        default=True,
        description=f"Also list the values you may see, with counts, for paths with at most "
        f"{MAX_LISTED_VALUES} distinct ones.",
    )


class FilterPathsAnswer(BaseModel):
    """The filterable paths: own fields, and relation paths over one hop."""

    paths: list[FilterPath]
    note: str | None = None


class OperatorsArgs(_Args):
    """The operators filters take."""

    path: str | None = Field(
        default=None,
        max_length=MAX_PREFIX,
        description="A path discover_filter_paths lists: the operators it takes. Default: "
        "the operators of every field type.",
    )


class OperatorsAnswer(BaseModel):
    """Operators by field type, what each means, and (for `path`) the ones it takes."""

    types: dict[str, list[str]]
    descriptions: dict[str, str]
    path: str | None = None
    path_type: str | None = None
    path_operators: list[str] | None = None
    max_depth: int
    max_comparisons: int


class ExportArgs(_Args):
    """Write every match of an earlier search to a file in the deployment's export folder."""

    query_id: str | None = Field(
        default=None,
        description="The search or find_elements to export (default: the most recent one).",
    )
    format: Literal["csv", "parquet", "arrow"] = Field(
        default="csv", description="csv (spreadsheets), parquet or arrow (data tools)."
    )
    file_name: str | None = Field(
        default=None,
        pattern=FILE_NAME,
        description="A plain name: letters, digits, - and _, no folder and no extension "
        "(added for the format). Default: the query_id and the time. Never overwrites.",
    )
    max_rows: int = Field(
        default=DEFAULT_MAX_ROWS,
        ge=1,
        le=DEFAULT_MAX_ROWS,
        description=f"Stop after this many rows (at most {DEFAULT_MAX_ROWS:,}).",
    )


class ExportAnswer(BaseModel):
    """What was exported, and where (a file name in the export folder)."""

    query_id: str
    file: str = Field(description="The file's name in the deployment's export folder.")
    format: str
    rows: int
    truncated: bool = Field(description="Whether max_rows cut the answer short.")
    degraded: list[str] = Field(
        default_factory=list[str],
        description="Backends some page was answered without (they failed or were too "
        "slow), and what is missing because of it; empty when every page was whole.",
    )
    note: str | None = None
