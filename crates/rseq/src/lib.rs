//! Restartable sequences (seed 004). Placeholder: the library arrives with issue 3.
