"""A real editor: Emacs, in batch mode, loads the eglot configuration of docs/editors.md verbatim, opens a
training script and reads back, through flymake, the diagnostics `cliplint server` gave it."""
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
EMACS = shutil.which("emacs")
pytestmark = pytest.mark.skipif(EMACS is None, reason="emacs is not installed (Debian: apt-get install emacs-nox "
                                                      "elpa-eglot)")

# After the README's block: open the file, start eglot as `M-x eglot` would, and wait for flymake.
HARNESS = """
(setq eglot-sync-connect 60)
(with-current-buffer (find-file-noselect (expand-file-name "train.py"))
  (python-mode)
  (apply #'eglot (eglot--guess-contact))
  (let ((deadline (+ (float-time) 90)))
    (while (and (< (float-time) deadline) (< (length (flymake-diagnostics)) 2))
      (accept-process-output nil 0.1)
      (flymake-start)))
  (let ((found (json-encode  ; read in the file's buffer, before `with-temp-file` leaves it
                (mapcar (lambda (d)
                          (list (cons 'start (list (line-number-at-pos (flymake-diagnostic-beg d))
                                                   (save-excursion (goto-char (flymake-diagnostic-beg d))
                                                                   (current-column))))
                                (cons 'end (list (line-number-at-pos (flymake-diagnostic-end d))
                                                 (save-excursion (goto-char (flymake-diagnostic-end d))
                                                                 (current-column))))
                                (cons 'text (flymake-diagnostic-text d))))
                        (flymake-diagnostics)))))
    (with-temp-file (getenv "CLIPLINT_EMACS_RESULT")
      (insert found))))
(kill-emacs 0)
"""


def readme_config() -> str:
    section = ROOT.joinpath("docs", "editors.md").read_text(encoding="utf-8").split("### Emacs (eglot)", 1)[1]
    return re.search(r"```elisp\n(.*?)```", section, re.S).group(1)


def eglot_loads() -> bool:
    loaded = subprocess.run([EMACS, "--batch", "--eval", "(progn (package-initialize) (require 'eglot))"],
                            capture_output=True, timeout=60)
    return loaded.returncode == 0


def test_emacs_eglot_shows_the_servers_diagnostics(tmp_path):
    if not eglot_loads():
        pytest.skip("eglot is not available to this Emacs (Debian: apt-get install elpa-eglot)")
    # Packages are activated as an interactive Emacs does at startup (batch mode does not).
    (tmp_path / "run.el").write_text("(package-initialize)\n(require 'eglot)\n" + readme_config() + HARNESS)
    (tmp_path / "train.py").write_text(TRAIN)
    result_file = tmp_path / "result.json"
    environment = {**os.environ, "CLIPLINT_EMACS_RESULT": str(result_file), "HOME": str(tmp_path),
                   "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run([EMACS, "--batch", "-l", "run.el"], cwd=tmp_path, env=environment, timeout=180,
                   capture_output=True, stdin=subprocess.DEVNULL)
    assert result_file.exists(), "Emacs did not finish"
    shown = sorted((tuple(d["start"]), tuple(d["end"]), d["text"].split(":")[0])
                   for d in json.loads(result_file.read_text()) or ())
    assert shown == [((line + 1, start), (line + 1, end), f"cliplint [{code}]") for line, start, end, code in EXPECTED]
