"""The scripted model: scenarios, their templates and patterns, where a conversation stands in a
script, the player that plays the next step, and injected faults."""
