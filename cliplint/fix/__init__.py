"""Autofix: the rules' fixes as text edits in rounds (`text`), of a Python file or a notebook
(`file`), over the paths of a run (`run`), and `--add-noqa` (`noqa`)."""
from .file import FileFix, fix_notebook, fix_python, placed_fixes
from .noqa import add_noqa_config, add_noqa_paths, add_noqa_text
from .run import FixVerifier, fix_data, fix_paths, where
from .text import Edit, Outcome, apply_edits, compiles, fix_text, fixes_for, offered

__all__ = ["Edit", "FileFix", "FixVerifier", "Outcome", "add_noqa_config", "add_noqa_paths", "add_noqa_text",
           "apply_edits", "compiles", "fix_data", "fix_notebook", "fix_paths", "fix_python", "fix_text",
           "fixes_for",
           "offered", "placed_fixes", "where"]
