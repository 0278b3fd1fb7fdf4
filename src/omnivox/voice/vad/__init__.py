"""Voice activity detection: per-frame speech probabilities (base, silero) and turn events (turn)."""
