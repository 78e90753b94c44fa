"""The data file formats, one package each: a format's rows (its schema and the row parser
that reads any line, the fallback), its compiled scan of a block of lines (the plain lines,
the hot path) and the block parser that puts both together, side by side."""
