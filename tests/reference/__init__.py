"""Reference engines (Hanabi Learning Environment, overcooked-ai) in a venv of their own.

They are test-only: ``hanabi-learning-environment`` 0.0.4 is an sdist whose CMake file needs
``CMAKE_POLICY_VERSION_MINIMUM=3.5`` with the CMake pip brings, and ``overcooked-ai`` 1.1.0 pins
the old ``gym``. Neither is imported by teamgym: each test runs a driver script of this folder in
that venv's interpreter and compares what it prints (JSON) with our engine.
"""
