"""``python -m kexpr.worker`` == ``kexpr worker``."""

from kexpr.worker.main import main

raise SystemExit(main())
