"""A bad `[node.<name>.llm]` table is refused with one line naming the file, the field and the fix;
exit 2; nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.engine_child import engine_run

GOOD = 'upstream = "http://127.0.0.1:9/v1"\napi_key_env = "LP_TEST_KEY"\n'
CASES = {
    "unknown field": (GOOD + "temperature = 1\n", "llm.temperature"),
    "credentials in the URL": ('upstream = "http://u:sk-abc@h:1/v1"\n', "llm.upstream"),
    "not http": ('upstream = "file:///etc/passwd"\n', "llm.upstream"),
    "negative price": (GOOD + "price_prompt_per_1k = -1\n", "llm.price_prompt_per_1k"),
    "cache price not a number": (GOOD + 'price_cache_write_per_1k = "1.25x"\n',
                                 "llm.price_cache_write_per_1k"),
    "negative cache price": (GOOD + "price_cache_read_per_1k = -0.1\n",
                             "llm.price_cache_read_per_1k"),
    "models not names": (GOOD + 'models = ["gpt-fake", 3]\n', "llm.models"),
    "max_tokens zero": (GOOD + "max_tokens = 0\n", "llm.max_tokens"),
    "key variable unset": ('upstream = "http://h:1/v1"\napi_key_env = "LP_UNSET_KEY"\n',
                           "llm.api_key_env"),
    "bad variable name": ('upstream = "http://h:1/v1"\napi_key_env = "A-B"\n',
                          "llm.api_key_env"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_llm_table_is_one_line_exit_2_nothing_written(tmp_path: Path, case: str):
    body, field = CASES[case]
    spec = tmp_path / "graph.toml"
    spec.write_text('[graph]\nspend_budget = 1\n[node.a]\nworker = ["true"]\ngate = ["true"]\n'
                    f"spend_ceiling = 1\n[node.a.llm]\n{body}")
    env = {"PATH": os.environ["PATH"], "LP_TEST_KEY": "sk-test"}
    proc = engine_run(["cli", "run", str(spec), "--ledger", str(tmp_path / "l.jsonl")], env=env,
                      timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "graph.toml" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and "sk-abc" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.toml"]
