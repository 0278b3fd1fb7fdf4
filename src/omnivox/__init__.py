"""omnivox: a self-hosted serving stack for real-time voice and video AI conversations."""

__version__ = "0.1.0"
