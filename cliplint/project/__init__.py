"""Project-wide analysis: the project's own imports, followed through small module summaries,
both ways (a file is linked with what it imports, and with the definitions that import it).

    roots.py    the source roots a module's absolute imports are resolved against
    resolve.py  imports the way Python resolves them, within the project (files, not names)
    summary.py  pass 1: a module's summary (CPython's ast; serialisable, content-hash keyed)
    lookup.py   what an imported (dotted) name is, from the summaries alone
    importers.py  who imports a module: the project's import lines read once per run (no parse)
    session.py  a run's summaries (memo and cache) and the summaries one file reads
    link.py     pass 2: a file's dataflow sees the summaries it imports as more (small) modules

Nothing here imports the rules; the value-flow engine (`flow/`) asks `link.Linked` through two
duck-typed methods (`imported`, `defined_at`) and never imports this package.
"""
