"""What the documentation site generates at build time (mkdocs hook in `hooks.py`): the
configuration reference from the config schema, and the results pages from the reports'
results files. Nothing here is committed as Markdown: the pages exist only in the built
site, so they cannot go stale."""
