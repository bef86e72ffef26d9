"""Result tables: one list of rows and one list of column specs, rendered as Markdown (to read) and
as CSV (for other tools).

Rows are dictionaries. A :class:`Column` names the row field it shows, its header, its unit and how
many decimals a number gets. Markdown cells get thousands separators (``46,647``); CSV cells keep
the plain value (``46647``) and CSV headers are the field names, so a CSV file reads back the
numbers that were measured. ::

    columns = [Column("block", "unit"), Column("lut4", "LUT4"), Column("fmax_mhz", "Fmax", "MHz", 1)]
    text = markdown(rows, columns)  # | unit | LUT4 | Fmax (MHz) | ...
    write_csv(out_dir / "fp32.csv", rows, columns)

:func:`metrics` renders the ``(metric, value)`` pairs an experiment reports, and :func:`document`
joins a title, paragraphs and tables into one Markdown file.
"""

import csv
import io
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Column", "cell", "markdown", "metrics", "csv_text", "write_csv", "document"]


@dataclass(frozen=True)
class Column:
    """One column of a table.

    Parameters
    ----------
    key : str
        The row field (``row[key]``); also the CSV header.
    title : str
        The Markdown header (default: ``key``).
    unit : str
        Appended to the Markdown header in brackets: ``Fmax (MHz)``. ``"%"`` shows a fraction as a
        percentage (``0.192`` -> ``19.2%``, with ``digits`` decimals).
    digits : int or None
        Decimals of a number in Markdown; ``None`` shows an integer as it is and a float with
        Python's shortest representation.
    get : callable or None
        ``get(row) -> value`` instead of ``row[key]`` (a derived column).
    csv : bool
        Whether the column is written to CSV (a derived Markdown-only column is not).
    """

    key: str
    title: str | None = None
    unit: str = ""
    digits: int | None = None
    get: object = None
    csv: bool = True

    @property
    def header(self):
        title = self.key if self.title is None else self.title
        return f"{title} ({self.unit})" if self.unit and self.unit != "%" else title

    def value(self, row):
        return self.get(row) if self.get is not None else row.get(self.key)

    def text(self, row):
        return cell(self.value(row), self.digits, percent=self.unit == "%")


def cell(value, digits=None, *, percent=False):
    """A value as Markdown shows it: numbers with thousands separators and ``digits`` decimals,
    ``None`` as ``-``, anything else as ``str(value)`` with ``|`` escaped."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Real):
        if percent:
            return f"{100 * value:,.{1 if digits is None else digits}f}%"
        if isinstance(value, numbers.Integral):
            return f"{int(value):,}"
        value = float(value)
        if digits is not None:
            return f"{value:,.{digits}f}"
        text = repr(value)
        if "e" in text or not math.isfinite(value):
            return text
        return f"{value:,.{len(text.partition('.')[2])}f}"
    return str(value).replace("|", "\\|")


def markdown(rows, columns):
    """A Markdown table of ``rows`` (dicts) in ``columns`` (:class:`Column` or field names)."""
    columns = [c if isinstance(c, Column) else Column(c) for c in columns]
    lines = [
        "| " + " | ".join(c.header for c in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(c.text(row) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def metrics(pairs, headers=("metric", "value")):
    """A two-column Markdown table of ``(metric, value)`` pairs."""
    rows = [{"metric": metric, "value": value} for metric, value in pairs]
    return markdown(rows, [Column("metric", headers[0]), Column("value", headers[1])])


def csv_text(rows, columns=None):
    """``rows`` as CSV: one column per CSV column of ``columns`` (default: every field of the
    first row), headed by its key, the plain values (no separators, no rounding)."""
    rows = list(rows)
    if columns is None:
        columns = list(rows[0]) if rows else []
    columns = [c if isinstance(c, Column) else Column(c) for c in columns]
    columns = [c for c in columns if c.csv]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([c.key for c in columns])
    for row in rows:
        writer.writerow([c.value(row) for c in columns])
    return buffer.getvalue()


def write_csv(path, rows, columns=None):
    """Write :func:`csv_text` to ``path``; returns the path as a string."""
    Path(path).write_text(csv_text(rows, columns), newline="")
    return str(path)


def document(path, title, *parts):
    """Write a Markdown file: ``# title`` then each part (a paragraph or a table), blank lines
    between them; ``None`` parts are left out. Returns the path as a string."""
    blocks = [f"# {title}", *(part for part in parts if part)]
    Path(path).write_text("\n\n".join(blocks) + "\n")
    return str(path)
