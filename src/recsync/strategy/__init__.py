"""The strategy kernel: what every strategy and every family is to the rest of recsync.

`config`: `StrategyConfig`, the base of every strategy's config; `registry`: the strategies
by name; `family`: `Family`, the interface every family implements, and the families'
registry; `roles`: what the kernel knows of each node role; `gradient`: the interface of a
gradient policy (events in, actions out) that the servers run; `timing`, `staleness_norm`:
the configs the strategies share; `controller`: the automatic switch between strategies.
Pure decisions: no clocks, threads or transport; both drivers execute them. The families
themselves live in recsync/families/, which this package imports only by name, when a
lookup needs the families registered.
"""
