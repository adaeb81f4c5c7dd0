//! butter_db (skeleton; the engine lands with its own issue).
