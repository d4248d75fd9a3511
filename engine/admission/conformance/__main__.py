from loopproof.engine.admission.conformance.suite import main

raise SystemExit(main())
