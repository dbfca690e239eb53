"""Scenario turns whose items are made outside the player (it calls them): the direct call of a
hosted shell (`shell.py`)."""
