"""Accept if the agent acted at least once and stopped because the budget refused a call."""

import json
import sys

try:
    with open("result.json") as f:
        result = json.load(f)
except (OSError, ValueError):
    sys.exit(1)
sys.exit(0 if result.get("stopped_by") == "budget" and result.get("calls", 0) >= 1 else 1)
