//! Holds no code: the models live in `tests/`, compiled only with `--cfg loom`.
