from experiments.growth.study import main

raise SystemExit(main())
