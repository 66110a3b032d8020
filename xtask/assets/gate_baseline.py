"""Benchmark baseline for `cargo xtask bench gate`: a Stop hook that works the way the seed's
Python hook does, re-reading and re-parsing the whole transcript at every stop. It applies the
same thresholds and first-check rules, so both programs do comparable work on the same input.
Its counter lives in $GATE_BASELINE_DIR (the seed used the system temp dir)."""
import json
import os
import sys
import tempfile

EDITS = {"Edit", "Write", "MultiEdit", "NotebookEdit"}


def main():
    hook = json.load(sys.stdin)
    if hook.get("stop_hook_active"):
        return 0
    calls = []
    entries = 0
    last_id = None
    with open(hook["transcript_path"], encoding="utf-8") as transcript:
        for line in transcript:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict) or row.get("type") != "assistant":
                continue
            message = row.get("message") or {}
            msg_id = message.get("id")
            if msg_id is None or msg_id != last_id:
                entries += 1
            last_id = msg_id
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        calls.append(block.get("name", ""))
    if len(calls) < 3:
        return 0
    state_dir = os.environ.get("GATE_BASELINE_DIR", tempfile.gettempdir())
    counter = os.path.join(state_dir, "gate-baseline-" + hook["session_id"])
    previous = 0
    if os.path.exists(counter):
        with open(counter) as f:
            previous = int(f.read() or 0)
    if entries - previous < 2:
        return 0
    with open(counter, "w") as f:
        f.write(str(entries))
    edits = sum(1 for name in calls if name in EDITS)
    stores = sum(1 for name in calls if "memory_store" in name)
    lookups = sum(1 for name in calls if "context_query" in name or "route_query" in name)
    problems = []
    if edits and not stores:
        problems.append("Modified %d file(s) but stored nothing." % edits)
    if previous == 0 and not lookups:
        problems.append("No lookup at the first check. Query the memory store first.")
    if problems:
        sys.stderr.write("KNOWLEDGE CHECK: " + " | ".join(problems) + " This is mandatory.\n")
        return 2
    return 0


sys.exit(main())
