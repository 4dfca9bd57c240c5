"""``python -m teamgym`` runs the ``teamgym`` command line."""

from teamgym.benchmarks.cli import main

raise SystemExit(main())
