from gitledger.cli import main

raise SystemExit(main())
