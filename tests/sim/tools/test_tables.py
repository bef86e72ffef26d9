"""The shared table helper: Markdown with separators and units, CSV with the plain values."""

import csv
import io

from gpurtl.sim.tools.tables import Column, cell, csv_text, markdown, metrics

ROWS = [
    {"block": "fp32_add", "lut4": 46647, "fmax_mhz": 154.7, "skipped": 0.192},
    {"block": "a|b", "lut4": 130, "fmax_mhz": 1234.25, "skipped": 0.0},
]
COLUMNS = [
    Column("block", "unit"),
    Column("lut4", "LUT4"),
    Column("fmax_mhz", "Fmax", "MHz", 1),
    Column("skipped", unit="%"),
    Column("twice", "2 x LUT4", get=lambda row: 2 * row["lut4"], csv=False),
]


def test_cells():
    assert cell(46647) == "46,647"
    assert cell(-1234567) == "-1,234,567"
    assert cell(199.52) == "199.52"
    assert cell(12345.5) == "12,345.5"
    assert cell(12345.5, 2) == "12,345.50"
    assert cell(0.192, percent=True) == "19.2%"
    assert cell(None) == "-"
    assert cell(True) == "True"
    assert cell(float("inf")) == "inf"
    assert cell(1e-9) == "1e-09"
    assert cell("x | y") == "x \\| y"


def test_markdown_has_headers_units_and_separators():
    lines = markdown(ROWS, COLUMNS).splitlines()
    assert lines[0] == "| unit | LUT4 | Fmax (MHz) | skipped | 2 x LUT4 |"
    assert lines[1] == "|---|---|---|---|---|"
    assert lines[2] == "| fp32_add | 46,647 | 154.7 | 19.2% | 93,294 |"
    assert lines[3] == "| a\\|b | 130 | 1,234.2 | 0.0% | 260 |"
    assert len(lines) == 2 + len(ROWS)


def test_csv_keeps_the_plain_values():
    text = csv_text(ROWS, COLUMNS)
    read = list(csv.DictReader(io.StringIO(text)))
    assert list(read[0]) == ["block", "lut4", "fmax_mhz", "skipped"]  # no Markdown-only column
    assert [r["lut4"] for r in read] == ["46647", "130"]
    assert [float(r["fmax_mhz"]) for r in read] == [154.7, 1234.25]  # not rounded
    assert read[1]["block"] == "a|b"
    assert list(csv.DictReader(io.StringIO(csv_text(ROWS))))[0]["skipped"] == "0.192"


def test_metrics_table():
    assert metrics([("cycles", 12345), ("state", "finished")]).splitlines() == [
        "| metric | value |",
        "|---|---|",
        "| cycles | 12,345 |",
        "| state | finished |",
    ]
