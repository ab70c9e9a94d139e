"""A real editor: Neovim, headless, runs the editors guide's (docs/editors.md) configuration for its version, opens a
training script and reads back the diagnostics `cliplint server` gave it."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from editor_script import EXPECTED, TRAIN

ROOT = Path(__file__).resolve().parent.parent
NVIM = shutil.which("nvim")
pytestmark = pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian: apt-get install neovim)")

HARNESS = """
local done = vim.wait(90000, function() return #vim.diagnostic.get(0) >= 2 end, 50)
local found = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  table.insert(found, { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
                        source = d.source, message = d.message, code = d.code or lsp.code })
end
local out = io.open(os.getenv('CLIPLINT_NVIM_RESULT'), 'w')
out:write(vim.fn.json_encode({ done = done, diagnostics = found }))
out:close()
vim.cmd('qa!')
"""


def nvim_version():
    first = subprocess.run([NVIM, "--version"], capture_output=True, text=True, timeout=60).stdout.split("\n")[0]
    return tuple(int(part) for part in re.search(r"v(\d+)\.(\d+)", first).groups())


def readme_config(version) -> str:
    """The Lua block the README gives for this Neovim version."""
    guide = ROOT.joinpath("docs", "editors.md").read_text(encoding="utf-8")
    section = guide.split("### Neovim", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"Neovim (0\.\d+)[^\n]*\n\n```lua\n(.*?)```", section, re.S)
    assert [since for since, _ in blocks] == ["0.11", "0.8", "0.7"], "the README's Neovim blocks changed"
    for since, code in blocks:
        if version >= tuple(int(part) for part in since.split(".")):
            return code
    pytest.skip(f"Neovim {version} is older than any configuration the README gives")


def test_neovim_shows_the_servers_diagnostics(tmp_path):
    (tmp_path / "init.lua").write_text(readme_config(nvim_version()))
    (tmp_path / "harness.lua").write_text(HARNESS)
    (tmp_path / "train.py").write_text(TRAIN)
    result_file = tmp_path / "result.json"
    environment = {**os.environ, "HOME": str(tmp_path), "CLIPLINT_NVIM_RESULT": str(result_file),
                   "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
                   "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data"),
                   "XDG_STATE_HOME": str(tmp_path / "state")}
    subprocess.run([NVIM, "--headless", "-i", "NONE", "-u", "init.lua", "-c", "luafile harness.lua", "train.py"],
                   cwd=tmp_path, env=environment, timeout=180, capture_output=True, stdin=subprocess.DEVNULL)
    result = json.loads(result_file.read_text())
    assert result["done"], "no diagnostics arrived"
    shown = sorted((d["lnum"], d["col"], d["end_lnum"], d["end_col"], d["code"], d["source"])
                   for d in result["diagnostics"])
    assert shown == [(line, start, line, end, code, "cliplint") for line, start, end, code in EXPECTED]
