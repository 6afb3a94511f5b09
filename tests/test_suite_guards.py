"""The test suite protects itself: a hang fails its test (pytest-timeout), and a test that cannot run for want of a
tool says so in one closing line instead of passing silently."""
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from types import SimpleNamespace

from conftest import missing_tool_counts

ROOT = Path(__file__).resolve().parent.parent


def test_every_test_has_a_timeout_backstop():
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    assert 60 <= int(ini["timeout"]) <= 900
    import pytest_timeout  # noqa: F401 - installed with the .[test] extra


def test_a_hanging_test_fails_instead_of_waiting(tmp_path):
    """A test that sleeps for an hour is stopped by the backstop (here set to 2 s) and reported as failed."""
    (tmp_path / "test_hang.py").write_text(textwrap.dedent("""
        import time
        def test_hangs():
            time.sleep(3600)
    """))
    # pytest-timeout as the only plugin: loading every installed one (nbval, playwright, …) cost 2-3 s of CPU /
    # 只加载 pytest-timeout 插件：加载全部已安装插件要多花 2–3 秒 CPU
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_timeout", "-q",
                          "-o", "timeout=2", str(tmp_path / "test_hang.py")],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert out.returncode == 1 and "Timeout" in out.stdout and "1 failed" in out.stdout, out.stdout[-2000:]


def test_skipped_browser_and_grading_tests_are_named_at_the_end():
    skipped = [SimpleNamespace(longrepr=("x", 1, "Skipped: Chromium not found: apt-get install chromium")),
               SimpleNamespace(longrepr=("x", 1, "Skipped: Chromium not found: apt-get install chromium")),
               SimpleNamespace(longrepr=("x", 1, "Skipped: .venv/bin/pip install -e '.[teach]' to run the round")),
               SimpleNamespace(longrepr=("x", 1, "Skipped: something else"))]
    lines = missing_tool_counts(skipped)
    assert len(lines) == 2
    assert lines[0].startswith("2 browser tests skipped: install Chromium") and "2 个浏览器测试被跳过" in lines[0]
    assert lines[1].startswith("1 nbgrader tests skipped") and "1 个 nbgrader 测试被跳过" in lines[1]
    assert missing_tool_counts(skipped[3:]) == []
