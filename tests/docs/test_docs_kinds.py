"""docs/engine.md's example of registering a node kind is the engine's own registration: the
factory and the fields it names are the ones `kind = "revision"` runs with (it once named a
`make_revision_node` that never existed)."""

import re

from loopproof.engine.admission import revision
from loopproof.engine.run.kinds import KINDS
from tests.support.paths import REPO

DOC = REPO / "docs" / "engine.md"


def test_the_documented_register_kind_call_is_the_real_one() -> None:
    (call,) = re.findall(r'^register_kind\("revision", (\w+), (\w+)\)', DOC.read_text(), re.M)
    factory, fields = (getattr(revision, name) for name in call)
    assert KINDS["revision"].factory is factory
    assert KINDS["revision"].fields == fields
