"""The record type shared by the consumer, the log and the tools.

:class:`Record` is native (``dafka._native``, see ``rust/src/python/record.rs``) so that
``Consumer.poll_many`` builds records without running Python code; this module
re-exports it for code that imports it from here.
"""

from __future__ import annotations

from dafka._native import Record

__all__ = ["Record"]
