"""Chat language models for the cascade: the interface (base), backends and stream helpers."""
