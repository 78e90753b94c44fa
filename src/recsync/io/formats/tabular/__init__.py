"""Tables (CSV, Parquet): rows.py (the schema and the row parser of python values),
blocks.py (columnar batches of a CSV block or a Parquet row group, the row parser for what
the columns cannot say)."""
