"""Bad input and misbehaving passes: clear errors, never a crash (fuzzing included)."""
