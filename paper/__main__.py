from paper.cli import main

raise SystemExit(main())
