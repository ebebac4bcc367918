"""Results people use: aggregation, comparisons, exports (registry, LocalMaxxing, CSV, JSON) and the HTML report.

Pure modules (aggregate, compare, filters, charts, html, exports, registry, registry_schema, localmaxxing) take
frozen records and return values; service.py is the one that reads the store.
"""
