from experiments.transition.study import main

raise SystemExit(main())
