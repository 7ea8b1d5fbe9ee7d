"""Assembly: spans grouped per trace until complete; runs grouped into conversations."""

from tracescorer.assembly.buffer import AssembledTrace, BufferStats, TraceBuffer, is_root
from tracescorer.assembly.conversations import (
    ConversationStats,
    ConversationTracker,
    group_conversations,
)

__all__ = [
    "AssembledTrace",
    "BufferStats",
    "ConversationStats",
    "ConversationTracker",
    "TraceBuffer",
    "group_conversations",
    "is_root",
]
