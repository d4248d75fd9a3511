from experiments.integrity.study import main

raise SystemExit(main())
