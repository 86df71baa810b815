#!/usr/bin/env python
"""Fuzz the receiver's decode by the million: the checks of tests/reliability/fuzzing.py.

Each case is a request made from a seed (odd but well-formed protobuf: ids of every length,
values of every type under the keys the decode reads, decision events, unknown status codes)
or a mutation of one (bit flips, inserted, deleted and duplicated bytes, truncation). A case
fails on any exception other than a clear refusal, a span of an accepted request lost or
counted twice, or a traceback logged while judging. Atheris (coverage-guided) is used when it
is installed (`pip install atheris`), otherwise seeded random cases.

  .venv/bin/python bench/fuzz_decode.py --cases 1000000          # seeded, about 50 minutes on 2 shared cores
  .venv/bin/python bench/fuzz_decode.py --atheris -atheris_runs=1000000
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from reliability.fuzzing import Pipeline, corpus, mutate, random_request  # noqa: E402

_log = logging.getLogger("fuzz_decode")


def seeded(cases: int, seed: int) -> dict[str, int]:
    pipeline = Pipeline()
    seeds = corpus()
    rnd = random.Random(seed)
    started = time.monotonic()
    try:
        for n in range(cases):
            roll = rnd.random()
            if roll < 0.4:
                data = random_request(rnd)
            elif roll < 0.7:
                data = mutate(random_request(rnd), rnd)
            else:
                data = mutate(rnd.choice(seeds), rnd)
            pipeline.check(data)
            if n % 100_000 == 99_999:
                pipeline = _fresh(pipeline)  # its open runs and dedupe table would only grow
                _log.info("%d cases, %.0f s: %s", n + 1, time.monotonic() - started, pipeline.outcomes)
        pipeline.finish()
    finally:
        pipeline.close()
    return pipeline.outcomes


def _fresh(old: Pipeline) -> Pipeline:
    old.finish()
    old.close()
    new = Pipeline()
    new.outcomes = old.outcomes
    return new


def with_atheris(argv: list[str]) -> None:
    import atheris  # type: ignore[import-not-found]

    pipeline = Pipeline()

    def one(data: bytes) -> None:
        pipeline.check(data)

    atheris.Setup([sys.argv[0], *argv], one)
    atheris.Fuzz()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--atheris", action="store_true", help="coverage-guided, with libFuzzer's own flags after it")
    args, rest = parser.parse_known_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.atheris:
        with_atheris(rest)
        return
    started = time.monotonic()
    outcomes = seeded(args.cases, args.seed)
    print(f"{args.cases} cases in {time.monotonic() - started:.0f} s, no failure: {outcomes}")


if __name__ == "__main__":
    main()
