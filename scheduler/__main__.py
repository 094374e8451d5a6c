"""``python -m scheduler``: the same as the ``py-scheduler`` console script."""

from scheduler.cli import console_main

raise SystemExit(console_main())
