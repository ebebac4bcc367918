"""The result filters: declared once in farm.filters, re-exported here for the report modules."""

from farm.filters import (
    ALL,
    FILTERS,
    STATUSES,
    ResultFilter,
    build_filter,
    engine_matches,
    filter_from_mapping,
    parse_time,
)

__all__ = [
    "ALL",
    "FILTERS",
    "STATUSES",
    "ResultFilter",
    "build_filter",
    "engine_matches",
    "filter_from_mapping",
    "parse_time",
]
