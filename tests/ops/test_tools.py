"""A missing operator tool skips a test on a developer's machine and fails it in CI (CI=true)."""

import pytest

from tests.ops import tools


@pytest.fixture
def absent_tool(monkeypatch):
    monkeypatch.setitem(tools.INSTALL, "kb-no-such-tool", "apt-get install -y kb-no-such-tool")
    return "kb-no-such-tool"


def test_a_missing_tool_fails_in_ci(absent_tool, monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y kb-no-such-tool"):
        tools.require(absent_tool)


def test_a_missing_tool_skips_outside_ci(absent_tool, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="kb-no-such-tool not found"):
        tools.require(absent_tool)


def test_a_present_tool_is_found():
    assert tools.require("kubectl").endswith("kubectl")
