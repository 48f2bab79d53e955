"""Compares alternating runs of `make bench-relay`, every row with its spread (docs/testing.md,
"Benchmarks").

usage: compare_runs.py BEFORE.log [BEFORE.log ...] -- AFTER.log [AFTER.log ...]

Each log is one run's printed table. For each figure the script prints every run's value,
the medians, and whether the two groups' ranges overlap ("within spread") or not ("moved");
the machine's speed moves between runs, so the primary figures are ratios taken in the same
run: locates/s as a share of pgbench's NOTIFY-only ceiling, p50 as a multiple of the floor,
the relays' CPU as a share of Postgres's. Nothing is asserted.
"""
import re
import statistics
import sys

NUMBER = r"([\d,]+(?:\.\d+)?)"


def number(text):
    return float(text.replace(",", ""))


def figures(path):
    """{figure name: value} of one run's table."""
    found = {}
    for line in open(path, encoding="utf-8"):
        if m := re.match(r"locate latency, (same|cross) instance\s+p50 ([\d.]+) ms, p99 ([\d.]+) ms\s+([\d.]+)x floor", line):
            found[f"latency p50, {m[1]} (ms)"] = number(m[2])
            found[f"latency p99, {m[1]} (ms)"] = number(m[3])
            found[f"latency p50 / floor, {m[1]}"] = number(m[4])
        elif m := re.match(r"floor: WebSocket echo \+ NOTIFY\s+p50 ([\d.]+) ms", line):
            found["floor p50 (ms)"] = number(m[1])
        elif m := re.match(r"locates/s, (same|cross) instance, \d+ agents, (\d) instances\s+" + NUMBER +
                           r"/s \((\d+) failed\), p50 ([\d.]+) ms, p99 ([\d.]+) ms\s+([\d.]+) of pgbench NOTIFY-only " +
                           NUMBER + r" tps; CPU ms per locate: relays ([\d.]+), Postgres ([\d.]+), client ([\d.]+);"
                           r"(?: relays' thread wake-ups ([\d.]+);)? WAL " + NUMBER, line):
            key = f"{m[1]}, {m[2]} inst"
            found["pgbench NOTIFY-only (tps)"] = number(m[8])
            found[f"locates/s, {key}"] = number(m[3])
            found[f"locates/s / pgbench, {key}"] = number(m[3]) / number(m[8])
            found[f"failed, {key}"] = number(m[4])
            found[f"p50 under load, {key} (ms)"] = number(m[5])
            found[f"p99 under load, {key} (ms)"] = number(m[6])
            found[f"CPU per locate, relays, {key} (ms)"] = number(m[9])
            found[f"CPU per locate, Postgres, {key} (ms)"] = number(m[10])
            found[f"CPU per locate, relays + Postgres, {key} (ms)"] = number(m[9]) + number(m[10])
            found[f"relays' CPU / Postgres's, {key}"] = number(m[9]) / number(m[10])
            if m[12]:
                found[f"relays' thread wake-ups per locate, {key}"] = number(m[12])
        elif m := re.match(r"calls per locate, (same|cross) instance\s+malloc ([\d.]+), swift_task_switch ([\d.]+), "
                           r"swift_task_create ([\d.]+)", line):
            key = m[1] + (", 4 inst" if f"malloc per locate, {m[1]}" in found else "")
            found[f"malloc per locate, {key}"] = number(m[2])
            found[f"swift_task_switch per locate, {key}"] = number(m[3])
            found[f"swift_task_create per locate, {key}"] = number(m[4])
        elif m := re.match(r"Postgres functions per locate, (same|cross) instance\s+" + NUMBER + r" µs self time", line):
            key = m[1] + (", 4 inst" if f"Postgres functions' self time per locate, {m[1]} (µs)" in found else "")
            found[f"Postgres functions' self time per locate, {key} (µs)"] = number(m[2])
        elif m := re.match(r"memory per idle phone at " + NUMBER + r"(, a beat later)?\s+" + NUMBER + " bytes(.*)", line):
            key = f"memory per idle phone at {m[1]}{m[2] or ''} (B)"
            found[key] = number(m[3])
            if heap := re.search(r"live heap " + NUMBER + " bytes per phone", m[4]):
                found[f"live heap per idle phone at {m[1]} (B)"] = number(heap[1])
        elif m := re.match(r"WAL per idle phone per minute at [\d,]+\s+" + NUMBER, line):
            found["WAL per idle phone per minute (B)"] = number(m[1])
    return found


def main(argv):
    if "--" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    groups = [[figures(path) for path in argv[:split]], [figures(path) for path in argv[split + 1:]]]
    names = []
    for runs in groups:
        for run in runs:
            names += [name for name in run if name not in names]
    print(f"{'figure':<58} {'before':<40} {'after':<40} medians")
    for name in names:
        values = [[run[name] for run in runs if name in run] for runs in groups]
        if not all(values):
            continue
        text = [" / ".join(f"{v:,.2f}" if v < 100 else f"{v:,.0f}" for v in group) for group in values]
        medians = [statistics.median(group) for group in values]
        moved = max(values[0]) < min(values[1]) or max(values[1]) < min(values[0])
        verdict = "moved" if moved else "within spread"
        print(f"{name:<58} {text[0]:<40} {text[1]:<40} {medians[0]:,.2f} -> {medians[1]:,.2f} ({verdict})")


if __name__ == "__main__":
    main(sys.argv[1:])
