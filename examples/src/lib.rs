//! Runnable examples of the transactional outbox; see `src/bin/`.
