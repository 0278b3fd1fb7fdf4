import sys
from pathlib import Path

# tests/cluster.py and other shared helpers import as plain modules
sys.path.insert(0, str(Path(__file__).parent))
