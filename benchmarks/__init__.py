"""How runs are made and reported: the ``teamgym`` command line, baseline runs, performance
benchmarks."""
