"""What one call between two nodes costs: a Ray actor call against a channel round trip
(runtime/transport/channel.py, the engine's loops' path), same message, same run.

The message is a lookup as a worker sends it to one of 8 embedding servers (256 x 26 ids
over 8 shards: 832 ids and offsets) and its reply (832 x 16 pooled floats), both as the
wire encodes them. The caller makes rounds of `--in-flight` calls at a time, each to a
connection (or Ray call) of its own on one callee process, as a worker's lookups go out.
Per path: wall seconds per call, and CPU seconds per call of the caller's process and of
the callee's (Ray's threads included); medians of `--repeats` runs. Prints one JSON object
with the ratios channel / Ray.

`channel_paced`: the channel's calls again, the caller sleeping `--pause-ms` after each
round (as a worker computes between its steps' calls), so the callee's threads sleep
between requests as in a running job: its CPU per call, and the same less what each
process spends idle over that time (each measured alone over `--idle-s`);
`paced_callee_cpu_ratio` sets that beside the back-to-back figure calibration uses.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import ray
import torch

from recsync.protocol.messages import Lookup, Pooled
from recsync.runtime.ray.job import connect
from recsync.runtime.ray.probe import idle_cores, per_call
from recsync.runtime.transport import wire
from recsync.runtime.transport.channel import ChannelServer, Connection, Endpoint

IDS = 256 * 26 // 8
DIM = 16


def _reply(_: Any) -> Any:
    return wire.encode(Pooled(torch.zeros(IDS, DIM)))


@ray.remote(num_cpus=0)
class Callee:
    """Answers lookups by Ray call and on its channel, with a pooled reply each."""

    def call(self, message: Any) -> Any:
        return _reply(message)

    def endpoint(self) -> Endpoint:
        self.server = ChannelServer(_reply, ray.util.get_node_ip_address())
        return self.server.endpoint

    def cpu_seconds(self) -> float:
        return time.process_time()


def _measure(callee: Any, round_of_calls, calls: int, repeats: int) -> dict[str, float]:
    wall, caller, served = per_call(callee, round_of_calls, calls, repeats)
    return {
        "wall_us": round(wall * 1e6, 1),
        "caller_cpu_us": round(caller * 1e6, 1),
        "callee_cpu_us": round(served * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=800)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pause-ms", type=float, default=5.0)
    parser.add_argument("--idle-s", type=float, default=3.0)
    args = parser.parse_args()

    connect(None, 2)
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(0, 1_000_000, (IDS,), generator=generator)
    message = wire.encode(Lookup(rows, torch.arange(IDS + 1), None))
    callee = Callee.remote()  # type: ignore[attr-defined]
    connections = [Connection(ray.get(callee.endpoint.remote())) for _ in range(args.in_flight)]

    def by_ray() -> int:
        ray.get([callee.call.remote(message) for _ in range(args.in_flight)])
        return args.in_flight

    def by_channel() -> int:
        tickets = [c.request(message) for c in connections]
        for ticket in tickets:
            ticket.result(60.0)
        return args.in_flight

    def paced() -> int:
        done = by_channel()
        time.sleep(args.pause_ms / 1e3)
        return done

    results = {}
    for name, round_of_calls in (("ray", by_ray), ("channel", by_channel), ("paced", paced)):
        results[name] = _measure(callee, round_of_calls, args.calls, args.repeats)
    caller_idle, callee_idle = idle_cores(callee, args.idle_s)
    paced_ = results["paced"]
    wall_s = paced_["wall_us"] / 1e6
    paced_["pause_ms"] = args.pause_ms
    paced_["caller_idle_cores"] = round(caller_idle, 4)
    paced_["callee_idle_cores"] = round(callee_idle, 4)
    paced_["caller_cpu_less_idle_us"] = round(
        paced_["caller_cpu_us"] - caller_idle * wall_s * 1e6, 1
    )
    paced_["callee_cpu_less_idle_us"] = round(
        paced_["callee_cpu_us"] - callee_idle * wall_s * 1e6, 1
    )
    for connection in connections:
        connection.close()
    ray.shutdown()
    ray_, chan = results["ray"], results["channel"]
    print(
        json.dumps(
            {
                "benchmark": "calls",
                "ids": IDS,
                "in_flight": args.in_flight,
                "ray": ray_,
                "channel": chan,
                "channel_paced": paced_,
                "wall_ratio": round(chan["wall_us"] / ray_["wall_us"], 3),
                "caller_cpu_ratio": round(chan["caller_cpu_us"] / ray_["caller_cpu_us"], 3),
                "callee_cpu_ratio": round(chan["callee_cpu_us"] / ray_["callee_cpu_us"], 3),
                "paced_callee_cpu_ratio": round(
                    paced_["callee_cpu_less_idle_us"] / chan["callee_cpu_us"], 3
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
