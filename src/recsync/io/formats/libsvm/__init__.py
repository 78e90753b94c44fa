"""libSVM / libFM and libffm: rows.py (the schemas and the row parsers), scan.py (the
compiled tokenizer of a block of lines), blocks.py (a block of lines into a batch: the
scan's plain lines, the row parsers for the rest)."""
