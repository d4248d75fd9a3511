from experiments.bounds.study import main

raise SystemExit(main())
