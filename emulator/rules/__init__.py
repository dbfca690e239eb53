"""The conversation rules: the items, the history a request continues, and what makes a conversation
valid (the hosted API's 400s). Nothing here knows the scripted model."""
