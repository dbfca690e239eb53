"""The Conversations API's rules over storage (`service.py`)."""

from ptc_emulator.emulator.conversations.service import Conversations

__all__ = ["Conversations"]
