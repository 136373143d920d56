"""Spread and confidence intervals, in pure Python (no numpy: the converter runs anywhere).

The quantiles interpolate linearly between order statistics, as vlrnn's measure::summarize
does, so a summary computed here equals one the C++ side wrote.
"""
import random

# A ratio whose 95 % interval reaches further than this from its value is "noisy"
# (NOTE [ Noisy points ] in vlrnn/include/vlrnn/measure/confidence.h): marked in tables and
# figures, never presented as a finding.
NOISY_HALF_WIDTH = 0.10
# Below this many repeats the quartiles are no better than the extremes: show min-max.
IQR_MIN_SAMPLES = 5
BOOTSTRAP_DRAWS = 2000


def quantile(sorted_values, q):
    position = q * (len(sorted_values) - 1)
    lo = int(position)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def summarize(samples):
    """{samples, median, q1, q3, min, max, mean, samples_s} of a list of seconds (as the C++
    TimingStats, plus the samples themselves in their original order)."""
    s = sorted(samples)
    return {"samples": len(s), "median": quantile(s, 0.5), "q1": quantile(s, 0.25),
            "q3": quantile(s, 0.75), "min": s[0], "max": s[-1], "mean": sum(s) / len(s),
            "samples_s": list(samples)}


def count(summary):
    """How many repeats a time summary holds."""
    return int(summary["samples"])


def spread(summary):
    """(low, high, name) of a time summary: the quartiles with IQR_MIN_SAMPLES repeats or more,
    else the extremes."""
    if count(summary) >= IQR_MIN_SAMPLES and "q1" in summary:
        return summary["q1"], summary["q3"], "IQR"
    return summary["min"], summary["max"], "min-max"


def is_noisy(value, interval):
    """True when the interval reaches more than NOISY_HALF_WIDTH away from the value, or when
    there is no interval at all (one repeat proves nothing)."""
    if not interval or value is None or value <= 0:
        return True
    lo, hi = interval
    return hi > value * (1 + NOISY_HALF_WIDTH) or lo < value * (1 - NOISY_HALF_WIDTH)


def _percentiles(values, level):
    values.sort()
    tail = (1.0 - level) / 2.0
    return [quantile(values, tail), quantile(values, 1.0 - tail)]


def _median(values):
    return quantile(sorted(values), 0.5)


def paired_ratio_ci(a, b, level=0.95, draws=BOOTSTRAP_DRAWS, seed=1):
    """95 % bootstrap interval of the median of a[i] / b[i] over paired rounds i (the two
    methods took turns within each round). None with fewer than two rounds."""
    if len(a) != len(b) or len(a) < 2:
        return None
    ratios = [x / y for x, y in zip(a, b)]
    rng = random.Random(seed)
    n = len(ratios)
    medians = [_median([ratios[rng.randrange(n)] for _ in range(n)]) for _ in range(draws)]
    return _percentiles(medians, level)


def unpaired_ratio_ci(a, b, level=0.95, draws=BOOTSTRAP_DRAWS, seed=1):
    """95 % bootstrap interval of median(a) / median(b) when the samples are not paired
    (Google Benchmark's interleaved repetitions). None with fewer than two samples a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    rng = random.Random(seed)
    out = []
    for _ in range(draws):
        ra = _median([a[rng.randrange(len(a))] for _ in a])
        rb = _median([b[rng.randrange(len(b))] for _ in b])
        out.append(ra / rb)
    return _percentiles(out, level)
