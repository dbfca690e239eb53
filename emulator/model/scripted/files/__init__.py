"""Scenario files on disk: loading directories of them (YAML and JSON), refusing duplicate names,
validating them without serving (`ptc-emulator validate`), and reloading them when they change
(`--watch`, `POST /_emulator/reset`)."""
