"""The reference harness: runs real workers and gates under the model's rules, adding only I/O."""
