"""The operating-system layer: processes, crash points, errors. Imports nothing else of engine."""
