"""The own-echo guard: the assistant's voice coming back through the user's speaker and microphone."""
