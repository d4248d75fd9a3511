"""`loopproof show --html`: one self-contained page, drawn by a real browser (headless Chromium).

The page measures what it drew (the curves' lengths and points, the attempts' boxes) into
`data-drawn`; Chromium's `--dump-dom` gives the DOM after that ran. A hostile worker's and gate's
output (markup, a script, a remote image) must arrive as text, never as elements."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from loopproof.engine import cli

# the gate prints markup that would fetch and run things if it were not escaped
HOSTILE = ("</pre></td></tr></table><script>document.title='pwned'</script>"
           "<img src=http://127.0.0.1:9/x.png><style>body{display:none}</style>")
GRAPH = f"""
[graph]
repair_budget = 1
spend_budget = 100.0

[node.a]
worker = ["sh", "-c", "echo $LOOPPROOF_ACTIVATION > v"]
gate = ["sh", "-c", "test -f v"]
attempts = 2
spend_ceiling = 5.0
timeout_s = 5

[node.b]
worker = ["sh", "-c", "cat inputs/a/v > got; echo \\"{HOSTILE}\\" >&2"]
gate = ["sh", "-c", "test \\"$(cat got)\\" = 1 || {{ echo \\"{HOSTILE}\\"; exit 1; }}"]
needs = ["a"]
repairs = ["a"]
attempts = 2
spend_ceiling = 5.0
timeout_s = 5
"""
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is needed: `make check` installs it (apt-get install chromium)"
    return found


def browse(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *flags,
                           page.as_uri()], capture_output=True, text=True, timeout=120)


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def run_page(tmp_path_factory) -> tuple[Path, dict, Path]:
    tmp = tmp_path_factory.mktemp("page")
    (tmp / "graph.toml").write_text(GRAPH)
    ledger = tmp / "L.jsonl"
    assert cli.main(["run", str(tmp / "graph.toml"), "--ledger", str(ledger), "--json"]) == 0
    page = tmp / "run.html"
    assert cli.main(["show", str(ledger), "--json", "--html", str(page)]) == 0
    return page, {}, tmp


@pytest.fixture(scope="module")
def browsed(run_page) -> tuple[str, Path]:
    """The page opened once by Chromium: the DOM it holds after the page's script ran, for the
    tests that read it (what it drew, what it escaped), and its screenshot, taken in the same
    launch."""
    page, _, tmp = run_page
    shot = tmp / "shot.png"
    done = browse(page, tmp / "profile", "--dump-dom", f"--screenshot={shot}",
                  "--window-size=1000,900")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, shot


@pytest.fixture(scope="module")
def dom(browsed) -> str:
    return browsed[0]


def test_the_page_draws_the_spend_curve_and_every_attempt(run_page, dom, capsys) -> None:
    _, _, tmp = run_page
    ledger = tmp / "L.jsonl"
    capsys.readouterr()
    cli.main(["show", str(ledger), "--json"])
    timeline = json.loads(capsys.readouterr().out)
    root = next(attrs for tag, attrs in _parse(dom) if tag == "html")
    drawn = json.loads(root["data-drawn"])
    steps = 2 * len(timeline["curve"])  # a step line: two points per change, one to the end
    assert drawn["lines"] == 2 and drawn["points"] == [steps, steps]
    assert all(length > 100 for length in drawn["length"])  # laid out, not just parsed
    assert drawn["attempts"] == len(timeline["attempts"]) == 5 and drawn["boxes"] == 5
    classes = [a.get("class", "") for t, a in _parse(dom) if t == "rect"]
    assert sorted(c.split()[1] for c in classes if c.startswith("attempt")) == [
        "accept", "accept", "accept", "reject", "reject"]


def test_the_page_is_self_contained_and_escapes_what_workers_and_gates_wrote(run_page,
                                                                             dom) -> None:
    page, _, _ = run_page
    text = page.read_text()
    assert "document.title='pwned'" in text.replace("&#x27;", "'")  # shown, as text
    tags = _parse(dom)
    names = [t for t, _ in tags]
    assert names.count("script") == 1 and names.count("style") == 1  # only the page's own
    assert not {"img", "iframe", "link", "object", "embed"} & set(names)
    for _, attrs in tags:  # nothing that names another resource
        for key, value in attrs.items():
            assert key not in ("src", "href") and "http" not in (value or ""), (key, value)
    title = next(i for i, (t, _) in enumerate(tags) if t == "title")
    assert "pwned" not in dom.split("<title>", 1)[1].split("</title>", 1)[0], title


def test_the_screenshot_shows_the_attempts_in_their_colours(browsed) -> None:
    import matplotlib.image

    from loopproof.engine.commands._page import COLOURS

    _, shot = browsed
    pixels = (matplotlib.image.imread(shot)[..., :3] * 255).round()

    def count(colour: str) -> int:
        rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
        return int((abs(pixels - rgb).max(axis=-1) <= 2).sum())

    # three accepted boxes and two rejected ones, each some hundreds of pixels, and the curve
    assert count(COLOURS["accept"]) > 3 * 300 and count(COLOURS["reject"]) > 2 * 300
    assert count("#1565c0") > 500


def _parse(dom: str) -> list[tuple[str, dict]]:
    p = Elements()
    p.feed(dom)
    return p.tags
