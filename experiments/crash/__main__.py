from experiments.crash.study import main

raise SystemExit(main())
