#!/usr/bin/env bash
# Runs every test of pisa-switch: formatting, lints, unit, property and namespace tests.
# Needs root for the namespace tests. Installs what it needs first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== rustfmt"
cargo fmt --all -- --check
echo "== the engine: no clock, no threads, no clap, no serde"
bash scripts/check-engine.sh
echo "== analysis package (Python)"
python3 -m unittest discover -s scripts
echo "== clippy"
cargo clippy --workspace --all-targets --release -- -D warnings
echo "== build (the namespace tests run the switch binaries)"
# The `ci` profile (Cargo.toml): release's optimisation without LTO, so the test binaries link
# fast. With --tests the binaries are built with the same features as `cargo test` below (which
# unifies the dev-dependencies' features), so the test step compiles no crate twice.
cargo build --workspace --profile ci --bins --tests
echo "== tests (optimised: the timing checks run only in optimised builds)"
cargo test --workspace --profile ci 2>&1 | tee target/test-output.txt
# Guard against a silently empty run.
grep -q "test result: ok" target/test-output.txt
