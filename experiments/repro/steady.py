"""The examples/s a reproduction's report reads off a stored point: the steady rate
(`eps_steady`, coordinator/measures.steady_eps; docs/simulator.md, "Examples per second"),
never the whole run's. A results file whose point lacks it fails, naming the file and the
point: its reproduction measures it again."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class MissingSteadyRate(LookupError):
    """A stored point without its steady examples/s."""


def _stored(point: Mapping[str, Any], results_file: str, name: str, key: str) -> Any:
    value = point.get(key)
    if value is None:
        raise MissingSteadyRate(
            f"{results_file}, point {name}: no steady examples/s ({key}); its reproduction "
            "measures it again"
        )
    return value


def steady(
    point: Mapping[str, Any], results_file: str, name: str, key: str = "eps_steady"
) -> float:
    """`point`'s steady examples/s (under `key`); MissingSteadyRate naming `results_file`
    and `name` where the point has none (a results file whose points hold only the whole
    run's rate)."""
    return float(_stored(point, results_file, name, key))


def steady_each(
    point: Mapping[str, Any], results_file: str, name: str, key: str = "eps_steady"
) -> list[float]:
    """`point`'s steady examples/s of each of its runs or segments, as `steady` fails."""
    return [float(v) for v in _stored(point, results_file, name, key)]
