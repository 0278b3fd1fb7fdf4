"""Realtime voice sessions on a worker: the OpenAI Realtime protocol over the cascade's voice stack."""
