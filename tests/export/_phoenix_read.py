"""Read spans back from Phoenix; run with the Phoenix venv's python (its client lives there).

Usage: python _phoenix_read.py BASE_URL PROJECT EXPECTED TIMEOUT_S. Polls until at least
EXPECTED spans are there (Phoenix ingests asynchronously) or TIMEOUT_S passes, reads once
more after a pause (so that late duplicates would show), and prints them as JSON lines.
"""

import json
import sys
import time

from phoenix.client import Client

base_url, project, expected, timeout_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(
    sys.argv[4])
client = Client(base_url=base_url)


def read():
    try:
        return client.spans.get_spans_dataframe(project_identifier=project, limit=100000)
    except Exception as exc:  # the project does not exist until its first span arrives
        print(f"# not yet: {type(exc).__name__}", file=sys.stderr)
        return None


deadline = time.monotonic() + timeout_s
df = read()
while (df is None or len(df) < expected) and time.monotonic() < deadline:
    time.sleep(1.0)
    df = read()
time.sleep(2.0)
df = read()
rows = [] if df is None else df.reset_index(drop=True).to_dict(orient="records")
for row in rows:
    print(json.dumps({
        "name": row["name"],
        "span_kind": row["span_kind"],
        "parent_id": row["parent_id"] if isinstance(row["parent_id"], str) else None,
        "span_id": row["context.span_id"],
        "trace_id": row["context.trace_id"],
        "start_us": int(row["start_time"].value // 1000),
        "end_us": int(row["end_time"].value // 1000),
        "status_code": row["status_code"],
        "events": [e["name"] for e in (row["events"] if isinstance(row["events"], list) else [])],
        "agentlog": row.get("attributes.agentlog") if isinstance(
            row.get("attributes.agentlog"), dict) else {},
        "gen_ai": row.get("attributes.gen_ai") if isinstance(
            row.get("attributes.gen_ai"), dict) else {},
    }, default=str))
