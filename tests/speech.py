"""Sentences the speech tests say and recognise (shared by the unit, integration and browser tests)."""

WEATHER = "what is the weather like in paris today"
