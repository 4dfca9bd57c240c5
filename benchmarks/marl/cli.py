"""``python -m teamgym.benchmarks.marl.ppo``: one run of IPPO or MAPPO from the command line,
one ``--flag`` per field of :class:`~teamgym.benchmarks.marl.ppo.Args`."""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence

from teamgym.benchmarks.marl import ppo
from teamgym.cli.common import unit_float

__all__ = ["main", "parse"]


def parse(argv: Sequence[str] | None = None) -> ppo.Args:
    """One ``--flag`` per field of :class:`~teamgym.benchmarks.marl.ppo.Args`."""
    parser = argparse.ArgumentParser(description=(ppo.__doc__ or "").split("\n\n")[0])
    for f in dataclasses.fields(ppo.Args):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, tuple):
            parser.add_argument(flag, nargs="*", default=f.default)
        elif f.name == "algo":
            parser.add_argument(flag, choices=["ippo", "mappo"], default=f.default)
        elif f.name == "sharing":
            parser.add_argument(flag, type=unit_float, default=f.default)
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default)
    ns = vars(parser.parse_args(argv))
    return ppo.Args(**{**ns, "env_args": tuple(ns["env_args"])})


def main(argv: Sequence[str] | None = None) -> None:
    """Train one run on one thread and print its held-out figures (sampled actions)."""
    ppo.torch.set_num_threads(1)
    arguments = parse(argv)
    t0 = time.time()
    trained, _ = ppo.train(arguments)
    held_out = ppo.evaluate(ppo.sampled(trained), arguments)
    print(f"trained in {time.time() - t0:.0f} s; held out: sampled {held_out}")


if __name__ == "__main__":
    main()
