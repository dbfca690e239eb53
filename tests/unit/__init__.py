"""The fast tier: the engine with a fake runner (no V8, no HTTP), and pure functions."""
