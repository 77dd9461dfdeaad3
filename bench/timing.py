"""Timing implementations side by side in interleaved rounds, for the bench/*.py scripts that
compare fusegen with its peers: every function is timed once per round (benchmark._time, the
median of triton's do_bench), the rounds one after another, and the median of the rounds is
reported with their range. A state of the process or the GPU that lasts a while then shows as
a spread instead of as one implementation's figure: single passes of bench/rope.py read the
same code's forward+backward 0.518 ms in one run and 0.711 in another, Liger's 0.696 and 0.475
(bench/results/2026-11-27-h100-rope-rounds/)."""
import statistics

from fusegen_ops import benchmark


def in_rounds(timed, rounds):
    """timed: name -> {measure: zero-argument function}. Returns name -> {measure: [ms of each
    round]}."""
    out = {name: {m: [] for m in fns} for name, fns in timed.items()}
    for _ in range(rounds):
        for name, fns in timed.items():
            for m, fn in fns.items():
                out[name][m].append(benchmark._time(fn))
    return out


def median(values):
    return statistics.median(values)


def spread(values):
    """The rounds' range, as text."""
    return f"{min(values):.3f}-{max(values):.3f}"


def add_rounds_argument(parser, default=3):
    parser.add_argument("--rounds", type=int, default=default,
                        help="rounds of timing every implementation; the medians are reported")


def rounds_note(rounds):
    """The sentence a results table's header says of how it was timed."""
    return (f"Medians of {rounds} rounds (every implementation once per round), the rounds' "
            "range beside them.")


def cell(median_ms, rounds_ms):
    """A table cell: the median and the rounds' range."""
    return f"{median_ms:.3f} ({spread(rounds_ms)})"
