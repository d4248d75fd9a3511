"""The admission layer's conformance cases, shipped with the engine: `loopproof conformance`."""
