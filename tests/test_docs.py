"""The README and `docs/`: an entry point of at most 200 lines, every figure beside the command
that prints it, no paths of a build machine or commit hashes, no link to a missing page.

The convention for figures (docs/index.md): a *figure* is a Markdown table row (not the header or
the `|---|` line) with a cell that starts with a number, or a line with a number followed by a
unit (:data:`UNITS`: `104.12 MHz`, `46647 LUT4`, `2000 passed`, `1.98x`). A figure must sit in a
section that names a command in its heading, before the figure or on the figure's own line: a
`gpurtl ...`, `make ...`, `pytest ...` or `python -m ...` in backticks or in a code block. The
lines above a page's first `##` heading count for every section of that page (a page that lists
its commands at the top).
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

#: Units that make a number in running text a measured figure.
UNITS = (
    r"MHz|GHz|ns|ms|s|min|h|%|MB|KB|GB|LUT4|FF|DSP|BRAM|cycles(?:/s)?|passed|failed"
    r"|instructions(?:/s| per CPU-s)?|instr/s|rays/s|rows/s|box tests/s|CPU-s"
)
FIGURE = re.compile(rf"(?<![\w.])\d(?:[\d,]|\s(?=\d))*(?:\.\d+)?(?:\s?(?:{UNITS})|x)(?![\w])")
COMMAND = re.compile(r"(?:^|[\s;(=])(?:gpurtl|make|pytest|python -m)\s+\S")
CODE_SPAN = re.compile(r"`([^`]+)`")
#: Paths of a build machine that must not appear in the project's text.
MACHINE_PATHS = ("/work/", "/tmp/", "../shared")
#: A commit hash: 7 or 9-40 hex digits with a letter and a digit (8 digits are FP32 bit patterns
#: such as 3f800000), not after `0x`.
HASH = re.compile(
    r"(?<![0-9A-Za-z_x])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])([0-9a-f]{7}|[0-9a-f]{9,40})(?![0-9A-Za-z_])"
)


def pages():
    return sorted(DOCS.glob("*.md"))


def figure_lines(text):
    """``(line number, line)`` of every figure of a Markdown text (see the module doc string)."""
    found, in_code, table_row = [], False, 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code or line.startswith("#"):
            table_row = 0
            continue
        if line.startswith("|"):
            table_row += 1
            cells = CODE_SPAN.sub("", line).strip().strip("|").split("|")
            starts = any(re.match(r"\s*[-+~]?\d", cell) for cell in cells)
            if table_row > 2 and (starts or FIGURE.search(CODE_SPAN.sub("", line))):
                found.append((number, line))
            continue
        table_row = 0
        if FIGURE.search(CODE_SPAN.sub("", line)):
            found.append((number, line))
    return found


def command_lines(text):
    """Line numbers where a command is named: a line of a code block, or the line where a code
    span (which may run over a line break) starts."""
    found, in_code, prose = set(), False, []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            prose.append("")
        elif in_code:
            prose.append("")
            if COMMAND.search(" " + line.strip()):
                found.add(number)
        else:
            prose.append(line)
    joined = "\n".join(prose)
    # ``double-backtick`` spans (which may hold a backtick) first, blanked out
    joined = re.sub(r"``.+?``", lambda m: re.sub(r"[^\n]", " ", m.group()), joined, flags=re.S)
    for span in re.finditer(r"`([^`]+)`", joined):
        if "\n\n" not in span.group(1) and COMMAND.search(" " + span.group(1).replace("\n", " ")):
            found.add(joined.count("\n", 0, span.start()) + 1)
    return found


def figures_without_command(text):
    """The figures of ``text`` whose section names no command before them."""
    figures = dict(figure_lines(text))
    commands = command_lines(text)
    preamble = False  # the page names a command above its first `##` heading
    section = False  # the current section has named one so far
    in_code, seen_section = False, False
    missing = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and re.match(r"#{2,6} ", line):
            seen_section, section = True, False
        if number in commands:
            if seen_section:
                section = True
            else:
                preamble = True
        if number in figures and not (section or preamble):
            missing.append(f"line {number}: {line.strip()[:100]}")
    return missing


def test_readme_is_an_entry_point():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; measurements belong in docs/"


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_figure_names_its_command(page):
    assert figures_without_command(page.read_text()) == []


@pytest.mark.parametrize("path", [README, *pages()], ids=lambda p: p.name)
def test_no_machine_paths_or_commit_hashes(path):
    text = path.read_text()
    for machine in MACHINE_PATHS:
        assert machine not in text, f"{path.name}: `{machine}`"
    assert figure_lines("the 1 x 1 build\n") == [] and figure_lines("1.98x faster\n") != []
    assert HASH.findall(text) == [], f"{path.name}: commit hashes"


def _links(path):
    return re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", path.read_text())


def test_linked_pages_exist():
    index = DOCS / "index.md"
    missing = []
    for source in (README, index):
        for link in _links(source):
            target = (source.parent / link).resolve()
            if not target.exists():
                missing.append(f"{source.name} -> {link}")
    assert missing == []
    # every page is reachable from the index
    listed = {Path(link).name for link in _links(index)}
    assert {p.name for p in pages()} - {"index.md"} <= listed


def test_the_checks_can_fail():
    """The convention's checks on texts that break it."""
    assert figures_without_command("# T\n\n## A\n\n| a | b |\n|---|---|\n| x | 12 |\n") == [
        "line 7: | x | 12 |"
    ]
    assert figures_without_command("# T\n\n## A\n\nIt runs at 104.12 MHz.\n") == [
        "line 5: It runs at 104.12 MHz."
    ]
    fine = "# T\n\n## A\n\n`gpurtl synth x`:\n\n| a | b |\n|---|---|\n| x | 12 |\n"
    assert figures_without_command(fine) == []
    assert figures_without_command("# T\n\n## A\n\nRun `gpurtl synth\n-p a=1`: 12 LUT4\n") == []
    # a command in the next section does not cover this one; one at the top covers the page
    assert figures_without_command("# T\n\n## A\n\n3 passed\n\n## B\n\n`pytest x`\n") != []
    assert figures_without_command("# T\n\n```\ngpurtl demo\n```\n\n## A\n\n3 passed\n") == []
    # a command in the heading covers its section
    assert figures_without_command("# T\n\n## A (`gpurtl check x`)\n\n3 passed\n") == []
    # RDNA 4, BVH8, gfx12 and code spans are not figures; a table header is not either
    assert figure_lines("RDNA 4 and BVH8 on gfx12, `--count 100`\n| 2 x 4 | b |\n|---|---|\n") == []
    assert figure_lines("| a | b |\n|---|---|\n| RDNA 4 dynamic | fp32 |\n| x | 7.46 |\n") == [
        (4, "| x | 7.46 |")
    ]
    assert figure_lines("the 1 x 1 build\n") == [] and figure_lines("1.98x faster\n") != []
    assert HASH.findall("at commit 4ed7859, word 3f800000, 0x7f800000") == ["4ed7859"]
