"""The conversation rules: what makes a conversation valid (the hosted API's 400s). Nothing here
knows the scripted model.

    conversation.py   reading a conversation (its history and this request's input) and holding
                      it to the item rules: `analyse` makes the `Conversation` every model reads
    checks.py         the checks a create goes through before anything plays
    contract.py       tool inputs and outputs against the schemas the request declares
    compaction.py     a window of items sealed into one `compaction` item, and read back
"""

from ptc_emulator.emulator.rules.checks import check_request
from ptc_emulator.emulator.rules.compaction import Compactor
from ptc_emulator.emulator.rules.contract import Violation
from ptc_emulator.emulator.rules.conversation import Conversation, analyse

__all__ = ["Compactor", "Conversation", "Violation", "analyse", "check_request"]
