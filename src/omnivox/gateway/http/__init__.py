"""The gateway's HTTP API and pages: health, workers, queue, sessions, metrics, voices, assets, pages."""
