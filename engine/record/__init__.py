"""The record: the hash-chained ledger, its signed head, and replay of a ledger into run state."""
