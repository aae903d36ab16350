//! Match tables (exact, LPM, ternary, range, optional) and action profiles/selectors.
