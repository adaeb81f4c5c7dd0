#!/usr/bin/env python3
"""The side-by-side table of the devnet's two `lighthouse bn` slashers, butter against LMDB,
over the same stretch of time (scripts/lighthouse.sh devnet; docs/lighthouse.md §6).

Usage: devnet_metrics.py DEVNET_OUT

For each node NAME in bin-butter, bin-lmdb it reads:
  DEVNET_OUT/NAME/metrics-start.txt, metrics-end.txt  the node's /metrics page, scraped at the
      start and at the end of the common stretch; the first line is `# scraped-at SECONDS`;
  DEVNET_OUT/NAME/node.log  the node's log, JSON lines; its "Completed slasher update" lines
      (time_taken, num_attestations, num_blocks) within the stretch;
and DEVNET_OUT/metrics.csv (sampled every epoch: database bytes, RSS in KiB).

The batch-time figures come from the difference of the two scrapes of the
`slasher_process_batch_time` histogram (count, sum, and the bucket bound under which half and
nine tenths of the stretch's batches fall), so a restart before the stretch does not count.
Prints a Markdown table; exits 1 if a node ran no batch in the stretch, 2 if an input is
missing or malformed.
"""

import csv
import datetime
import json
import pathlib
import statistics
import sys

NODES = (("bin-butter", "butter"), ("bin-lmdb", "lmdb"))
HISTOGRAM = "slasher_process_batch_time"


class Malformed(Exception):
    pass


def scrape(path):
    """(scraped_at, {sample name with labels: value}) of one saved /metrics page."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise Malformed(f"{path}: {e}")
    if not lines or not lines[0].startswith("# scraped-at "):
        raise Malformed(f"{path}: the first line is not '# scraped-at SECONDS'")
    samples = {}
    for line in lines[1:]:
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            samples[name] = float(value)
        except ValueError:
            raise Malformed(f"{path}: {line!r} is not a sample")
    return float(lines[0].split()[2]), samples


def buckets(samples):
    """{upper bound: cumulative count} of the batch-time histogram."""
    out = {}
    prefix = HISTOGRAM + '_bucket{le="'
    for name, value in samples.items():
        if name.startswith(prefix):
            bound = name[len(prefix):].split('"')[0]
            out[float("inf") if bound == "+Inf" else float(bound)] = value
    return out


def quantile_bound(cumulative, count, q):
    """The smallest bucket bound under which at least q of the batches fall."""
    for bound in sorted(cumulative):
        if cumulative[bound] >= q * count:
            return bound
    return float("inf")


def batch_lines(log, start, end):
    """(time_taken ms, attestations, blocks) of each completed batch logged in [start, end]."""
    out = []
    try:
        text = log.read_text(errors="replace")
    except OSError as e:
        raise Malformed(f"{log}: {e}")
    for line in text.splitlines():
        if "Completed slasher update" not in line:
            continue
        try:
            rec = json.loads(line)
            ts = datetime.datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp()
            taken = float(str(rec["time_taken"]).removesuffix("ms"))
            row = (taken, int(rec["num_attestations"]), int(rec["num_blocks"]))
        except (ValueError, KeyError, TypeError) as e:
            raise Malformed(f"{log}: {line[:120]!r}: {e!r}")
        if start <= ts <= end:
            out.append(row)
    return out


def sampled(csv_path, node, start, end):
    """(last database bytes, largest RSS KiB) of the samples of `node` in [start, end]."""
    size, rss = None, None
    try:
        with open(csv_path, newline="") as f:
            for row in csv.DictReader(f):
                if row["node"] != node or not start <= float(row["time"]) <= end:
                    continue
                if row["database_bytes"]:
                    size = float(row["database_bytes"])
                if row["rss_kib"]:
                    rss = max(rss or 0, int(row["rss_kib"]))
    except (OSError, KeyError, ValueError) as e:
        raise Malformed(f"{csv_path}: {e!r}")
    return size, rss


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    out = pathlib.Path(sys.argv[1])
    rows, failures = [], []
    try:
        for directory, name in NODES:
            start, first = scrape(out / directory / "metrics-start.txt")
            end, last = scrape(out / directory / "metrics-end.txt")
            count = last.get(HISTOGRAM + "_count", 0) - first.get(HISTOGRAM + "_count", 0)
            total = last.get(HISTOGRAM + "_sum", 0) - first.get(HISTOGRAM + "_sum", 0)
            before, after = buckets(first), buckets(last)
            cumulative = {b: after[b] - before.get(b, 0) for b in after}
            batches = batch_lines(out / directory / "node.log", start, end)
            size, rss = sampled(out / "metrics.csv", name, start, end)
            if count <= 0:
                failures.append(f"{directory}: no slasher batch between the two scrapes")
                continue
            attestations = [a for _, a, _ in batches]
            rows.append((
                name, int(count), total / count * 1000,
                quantile_bound(cumulative, count, 0.5) * 1000,
                quantile_bound(cumulative, count, 0.9) * 1000,
                statistics.mean(attestations) if attestations else float("nan"),
                max(attestations) if attestations else 0,
                size, rss, (end - start) / 60,
            ))
    except Malformed as e:
        print(f"devnet_metrics.py: unusable input: {e}", file=sys.stderr)
        sys.exit(2)
    print("| slasher | batches | batch time mean (ms) | p50 bucket ≤ (ms) | p90 bucket ≤ (ms) "
          "| attestations per batch (mean / max) | database size (MiB) | node RSS max (MiB) | minutes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, count, mean, p50, p90, att, att_max, size, rss, minutes in rows:
        size_text = f"{size / 2**20:.2f}" if size is not None else "?"
        rss_text = f"{rss / 1024:.0f}" if rss is not None else "?"
        print(f"| {name} | {count} | {mean:.1f} | {p50:g} | {p90:g} | {att:.0f} / {att_max} "
              f"| {size_text} | {rss_text} | {minutes:.1f} |")
    for f in failures:
        print(f"FAIL: {f}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
