"""Where the tests find the checkout: one place, so that moving a test file changes no path."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
