"""The history a request continues, and recognising it again.

cursor.py     the conversation cursor: a recognised prefix's items (the very objects) and what
              was derived over them (the rules' pass, the script's walk, the programs' call
              positions and journal entries, what the model reads), extended once per request
stored.py     what stored responses hold: a `previous_response_id` chain rebuilt (with its
              cursors: `Chains`), item references resolved, a `store: false` replay's history
              recovered, input items listed
replayed.py   a `store: false` body that extends one seen before: its known items handed over
              as the models already validated, with their cursor (and stored responses' items,
              validated once)
"""

from ptc_emulator.emulator.history.cursor import Cursor, Extension
from ptc_emulator.emulator.history.stored import Chains, History, as_input, as_response_item

__all__ = ["Chains", "Cursor", "Extension", "History", "as_input", "as_response_item"]
