"""The test suite: a package, so helpers are imported by their full names (tests.support, ...)."""
