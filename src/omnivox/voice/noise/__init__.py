"""Noise suppression on the user's input, before the VAD and the ASR (``noise_reduction``)."""
