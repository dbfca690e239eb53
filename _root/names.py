"""Names the server, its clients and the pytest plugin share, defined once.

Imports nothing: the pytest plugin (loaded in every pytest run of any project the package is
installed in) reads these, and must cost no more than pytest and the standard library do.
"""

__all__ = ["API_KEY_ENV", "SCOPE_HEADER", "SCOPE_METADATA_KEY"]

SCOPE_HEADER = "x-ptc-emulator-scope"
"""The request header that names the caller's scope (its scenarios, journal and stores)."""
SCOPE_METADATA_KEY = "ptc_emulator_scope"
"""The same scope, where a client can set only a request's `metadata`."""
API_KEY_ENV = "PTC_EMULATOR_API_KEY"
"""The environment variable that holds the API key the server requires (and clients send)."""
