"""Experiments on recsync, outside the product (not in its wheel): the papers'
reproductions (`repro/`, found by `recsync reproduce`). They import recsync; recsync never
imports them (its `reproduce` command loads this package by path: see
`recsync.app.cli.experiments`)."""
