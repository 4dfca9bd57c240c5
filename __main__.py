"""``python -m teamgym`` runs the ``teamgym`` command line."""

from teamgym.cli import main

raise SystemExit(main())
