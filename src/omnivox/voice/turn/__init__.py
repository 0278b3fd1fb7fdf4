"""End of turn: models that judge from the user's audio whether they have finished, and the policy
that turns a pause and such a judgement into a decision (OpenAI's ``semantic_vad``)."""
