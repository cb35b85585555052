"""Plain-text tables for every ``kb`` command (routes, checks, jobs, the board): columns as wide as their widest cell,
so long names keep the columns aligned; the last column (free text) is never padded and its rule never runs longer
than its heading needs."""

RULE_MAX = 24  # the free-text last column's rule: as wide as its widest cell, up to this


def table(headings: list[str] | None, rows: list[list[str]], numeric=(), indent: str = "  ") -> list[str]:
    """The lines of a table; ``numeric``: the indexes of right-aligned columns; ``headings`` None: rows only."""
    cells = [[" ".join(str(c).split()) for c in row] for row in rows]  # a cell is one line, whatever it holds
    if headings is None and not cells:
        return []
    heads = headings if headings is not None else [""] * len(cells[0])
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(heads)]
    rule = [*widths[:-1], min(widths[-1], max(len(heads[-1]), RULE_MAX))] if widths else []

    def line(row: list[str]) -> str:
        parts = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return (indent + "  ".join(parts)).rstrip()

    top = [] if headings is None else [line(heads), indent + "  ".join("-" * w for w in rule)]
    return [*top, *(line(r) for r in cells)]
