"""Static pages and plain JavaScript modules served by the gateway (no build step)."""

from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
PAGES = ("index", "turnbased", "voice", "duplex", "omni", "admin", "sessions")
# pages under a path of their own, with the part after it for the page to read
PAGE_PATHS = {"/sessions/{session_id}": "session"}
