"""``python -m worker`` == ``kexpr worker``."""

from worker.main import main

raise SystemExit(main())
