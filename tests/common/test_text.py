"""The one table helper every kb table uses (services/common/text.py): long names keep the columns aligned, the free
text last column never draws a rule of hundreds of dashes, and a cell is one line whatever it holds."""

from services.common.text import RULE_MAX, table


def test_long_names_keep_every_column_aligned():
    rows = [["a-route-name-much-longer-than-any-fixed-width-of-forty", "alice", "0123456789ab"], ["r", "b", "x"]]
    lines = table(["route", "owner", "head"], rows, indent="")
    starts = {line.index(cell) for line, cell in zip(lines[2:], ("alice", "b"), strict=True)}
    assert len(starts) == 1 and lines[0].index("owner") in starts


def test_the_free_text_column_rule_stays_short_and_cells_are_one_line():
    reason = "x" * 500
    lines = table(["route", "reason"], [["r", reason], ["s", "line one\nline two"]])
    assert len(lines[1].split()[-1]) == RULE_MAX and lines[2].endswith(reason)
    assert lines[3].endswith("line one line two") and len(lines) == 4


def test_numbers_align_right_and_rows_alone_have_no_heading():
    assert table(["#", "score"], [["1", "2.5"], ["10", "12.25"]], numeric={0, 1}, indent="")[2:] == [
        " 1    2.5",
        "10  12.25",
    ]
    assert table(None, [["a", "b"], ["long", "c"]], indent="") == ["a     b", "long  c"]
    assert table(None, []) == []
