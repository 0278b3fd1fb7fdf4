"""What a session's frames say, as a recording sees it: one reader per wire protocol."""
