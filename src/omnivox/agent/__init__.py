"""The protocol-neutral voice agent: hearing, turn-taking, interruption, the playout ledger, replies.

See docs/architecture.md for where it sits and how a turn runs through it.
"""
