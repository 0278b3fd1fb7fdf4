"""The control plane: worker registration and health, internal worker -> gateway frames, queue
notices, pipeline reports."""
