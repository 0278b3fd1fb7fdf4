"""The models behind pipeline stages: each binds a voice model (or the tiny transformer) to one of the
pipeline's schedulers. The pipeline core knows none of them; ``build_scheduler`` is what
``omnivox stage`` loads."""
