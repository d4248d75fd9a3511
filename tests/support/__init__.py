"""What tests share (oracles, fakes, builders, strategies): imported as `tests.support.x`, so that
no test file imports another."""
