from experiments.mutants.study import main

raise SystemExit(main())
