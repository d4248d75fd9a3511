"""The fake upstream of the proxy tests ends with its block: a handler still in a scripted delay
when its client has gone neither outlives the block nor writes into another test's output (it
printed a BrokenPipe traceback into whichever test ran next), and a real error in a handler fails
the test that owns the server."""

from __future__ import annotations

import http.client
import threading
import time

import pytest

from tests.support.fake_openai import Reply, fake_openai


def _give_up_early(url: str) -> None:
    host, port = url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=0.3)
    with pytest.raises(TimeoutError):
        conn.request("POST", "/v1/chat/completions", body=b'{"stream": true}',
                     headers={"Content-Length": "16"})
        conn.getresponse().read()
    conn.close()


def test_a_slow_handler_whose_client_left_ends_with_the_block(capfd: pytest.CaptureFixture):
    before = set(threading.enumerate())
    t0 = time.monotonic()
    with fake_openai([Reply("a b c", delay_s=30), Reply("a b c", chunk_delay_s=30)]) as up:
        _give_up_early(up.base_url)
        _give_up_early(up.base_url)
        assert len(up.requests) == 2
    assert time.monotonic() - t0 < 10  # the delays were cut short, not waited out
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_an_error_in_a_handler_fails_the_owner_of_the_server():
    with (pytest.raises(AssertionError, match="the fake upstream's handlers failed"),
          fake_openai([]) as up):
        up.on_request = lambda body: 1 / 0
        host, port = up.base_url.split("//")[1].split("/")[0].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request("POST", "/v1/chat/completions", body=b"{}")
        with pytest.raises((http.client.HTTPException, OSError)):
            conn.getresponse().read()
        conn.close()
