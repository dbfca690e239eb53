"""The request journal: what each client asked and what it got.

entries.py      the journal and its entries (bounded, in memory)
grouping.py     which entries form one conversation (the journal's figures and the inspector read it)
evaluation.py   figures per conversation, and a baseline compared with a programmatic run
"""

from ptc_emulator.emulator.journal.entries import Figures, Journal, JournalEntry

__all__ = ["Figures", "Journal", "JournalEntry"]
