"""``python -m scheduler``: the same as the ``py-scheduler`` console script."""

from scheduler.cli import main

raise SystemExit(main())
