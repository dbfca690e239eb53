"""The history a request continues: what stored responses hold, what a `store: false` body
replays, and the conversation rules' kept passes over items already read."""
