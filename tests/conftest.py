"""Enables pytester for the plugin tests (it must be enabled from the rootdir conftest)."""

pytest_plugins = ["pytester"]
