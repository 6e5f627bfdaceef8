"""Reads a tailscope HdrHistogram interval log with the reference Python reader (PyPI's
hdrhistogram) and prints, per tag, the p50/p99/p99.9 in µs and the count of all its intervals
added up, as one JSON object."""
import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

HOUR_NS = 3600 * 10**9
reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, HOUR_NS, 3))
series = {}
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    series.setdefault(h.get_tag(), HdrHistogram(1, HOUR_NS, 3)).add(h)
out = {}
for tag, h in series.items():
    out[str(tag)] = {
        "p50": h.get_value_at_percentile(50) / 1000.0,
        "p99": h.get_value_at_percentile(99) / 1000.0,
        "p99.9": h.get_value_at_percentile(99.9) / 1000.0,
        "count": h.get_total_count(),
    }
print(json.dumps(out))
