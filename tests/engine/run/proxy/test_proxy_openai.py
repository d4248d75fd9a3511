"""The real `openai` Python client pointed at the proxy (through the loopback bridge, as inside a
sandbox): non-streamed and streamed chat, completions, the model list, and the budget's 402."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_openai import Reply, fake_openai
from tests.support.proxy_helpers import run_calls


def test_the_openai_client_works_unchanged_through_the_proxy(tmp_path: Path):
    script = [Reply("hello there"), Reply("one two three"), Reply("done")]
    with fake_openai(script) as up:
        def body(s):
            client = s.openai()
            chat = client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": "hi"}], max_tokens=9)
            chunks = list(client.chat.completions.create(
                model="fake-model", messages=[{"role": "user", "content": "hi"}], stream=True,
                stream_options={"include_usage": True}))
            text = client.completions.create(model="fake-model", prompt="say", max_tokens=5)
            models = client.models.list()
            return {"chat": chat.choices[0].message.content, "usage": chat.usage.completion_tokens,
                    "stream": "".join(c.choices[0].delta.content or "" for c in chunks
                                      if c.choices),
                    "stream_usage": chunks[-1].usage.completion_tokens,
                    "completion": text.choices[0].text,
                    "models": [m.id for m in models.data]}
        out = run_calls(tmp_path, up.base_url, body)
    assert out.value == {"chat": "hello there", "usage": 2, "stream": "one two three",
                         "stream_usage": 3, "completion": "done", "models": ["fake-model"]}
    calls = out.calls()
    assert [c["endpoint"] for c in calls] == ["/v1/chat/completions", "/v1/chat/completions",
                                             "/v1/completions", "/v1/models"]
    assert [c["usage"] for c in calls[:3]] == ["reported"] * 3


def test_the_budget_refusal_reaches_the_client_as_an_api_error(tmp_path: Path):
    import openai  # the SDK's import is ~2 CPU-s: paid by the tests that use it, not at collection

    with fake_openai([]) as up:
        def body(s):
            client = s.openai()
            with pytest.raises(openai.APIStatusError) as info:
                client.chat.completions.create(
                    model="fake-model", messages=[{"role": "user", "content": "x" * 5000}])
            return {"status": info.value.status_code, "code": info.value.code,
                    "type": info.value.type}
        out = run_calls(tmp_path, up.base_url, body, ceiling=1.0, budget=1.0)
        assert up.requests == []
    assert out.value == {"status": 402, "code": "budget_exceeded", "type": "insufficient_quota"}
    with fake_openai([]) as up:
        def wrong_key(s):
            client = openai.OpenAI(base_url=s.base_url(), api_key="sk-guessed", max_retries=0)
            with pytest.raises(openai.AuthenticationError) as info:
                client.models.list()
            return info.value.status_code
        (tmp_path / "w").mkdir()
        assert run_calls(tmp_path / "w", up.base_url, wrong_key).value == 401
        assert up.requests == []
