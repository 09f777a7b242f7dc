"""Fuzzing the broker's input paths: frames, every request declaration, the record-batch validator."""
