"""The history a request continues, and recognising it again.

stored.py     what stored responses hold: a `previous_response_id` chain rebuilt, item
              references resolved, a `store: false` replay's history recovered, input items listed
replayed.py   a `store: false` body that extends one seen before: its known items handed over
              as the models already validated (and stored responses' items, validated once)
folds.py      the conversation rules' kept passes, so a replayed prefix is not read again
"""

from ptc_emulator.emulator.history.folds import Folds
from ptc_emulator.emulator.history.stored import History, as_input, as_response_item

__all__ = ["Folds", "History", "as_input", "as_response_item"]
