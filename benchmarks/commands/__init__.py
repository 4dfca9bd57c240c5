"""The ``teamgym`` subcommands, one module each: ``add_parser(subparsers)`` declares its flags,
``run(args, console)`` does the work. ``teamgym.benchmarks.cli`` lists them in help order."""
