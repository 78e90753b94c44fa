"""Criteo TSV: rows.py (the schema and the row parser), scan.py (the compiled scan of a
block of lines), blocks.py (a block of lines into a batch: the scan's plain lines, the row
parser for the rest)."""
