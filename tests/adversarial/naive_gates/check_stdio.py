"""Naive gate, stdin/stdout style: run the candidate as a child on each case's input, compare
the JSON it prints with the case's output."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "io_cases.jsonl")) as f:
    cases = [json.loads(line) for line in f if line.strip()]
for case in cases:
    run = subprocess.run([sys.executable, "median.py"], input=json.dumps(case["input"]),
                         capture_output=True, text=True, timeout=20)
    try:
        got = json.loads(run.stdout)
    except ValueError:
        sys.exit(1)
    if run.returncode != 0 or got != case["output"]:
        sys.exit(1)
sys.exit(0)
