"""Time the download pipeline (emergence/prefetch.py) saves: fetch one revision ahead of the screen.

Prints the wall time of ``n`` revisions whose fetch and screen each take a fixed time (sleeps, so
the figure is the pipeline's own overhead and overlap, not the machine's speed), pipelined
(``ahead=1``) and serial (``ahead=0``). Ideal: pipelined ``n * max(fetch, screen) + fetch``,
serial ``n * (fetch + screen)``.

    .venv/bin/python benchmarks/bench_prefetch.py [--revisions 8] [--fetch 0.5] [--screen 0.5]
"""

import argparse
import time

from emergence.prefetch import Pipeline


def wall(n: int, fetch_s: float, screen_s: float, ahead: int) -> float:
    def fetch(i):
        time.sleep(fetch_s)
        return i

    tic = time.perf_counter()
    for got in Pipeline(range(n), fetch, lambda i, v: None, ahead=ahead):
        assert got.error is None
        time.sleep(screen_s)
    return time.perf_counter() - tic


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--revisions", type=int, default=8)
    ap.add_argument("--fetch", type=float, default=0.5)
    ap.add_argument("--screen", type=float, default=0.5)
    a = ap.parse_args()
    n, f, s = a.revisions, a.fetch, a.screen
    piped, serial = wall(n, f, s, 1), wall(n, f, s, 0)
    print(f"{n} revisions, fetch {f:g} s, screen {s:g} s each")
    print(f"pipelined: {piped:.2f} s (ideal {n * max(f, s) + f:.2f} s)")
    print(f"serial:    {serial:.2f} s (ideal {n * (f + s):.2f} s)")
    print(f"saved:     {1 - piped / serial:.0%} of the serial time")


if __name__ == "__main__":
    main()
