"""Static pages and plain JavaScript modules served by the gateway (no build step)."""

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
PAGES = ("index", "turnbased", "voice", "duplex", "omni", "admin")
