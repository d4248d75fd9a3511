"""The model benchmark stays out of a plain `python -m bench` (minutes of model time) and says why
it did not run; asked for by name without weights, it is skipped with the fix, not an error."""

import argparse

from bench import llm


def test_skipped_unless_asked_for_by_name():
    out = llm.bench_llm(argparse.Namespace(only=None))
    assert "--only llm_tokens" in out["skipped"]


def test_without_weights_it_says_how_to_fetch_them(monkeypatch):
    monkeypatch.setattr(llm, "_model_path", lambda: None)
    out = llm.bench_llm(argparse.Namespace(only=["llm_tokens"]))
    assert "skipped" in out and ("weights" in out["skipped"] or "gpt4all" in out["skipped"])
