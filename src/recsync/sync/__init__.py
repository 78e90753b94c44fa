"""Synchronization policies: pure state machines (events in, decisions out), no clocks,
threads or transport; both drivers execute them. Each strategy is one module with its
frozen config dataclass; `registry` names them all, `family` gives their types."""
