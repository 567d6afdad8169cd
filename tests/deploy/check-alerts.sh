#!/usr/bin/env bash
# tests/deploy/check-alerts.sh - deploy/prometheus/alerts.yml loads and
# behaves: `promtool check rules` (syntax, templates) and `promtool test
# rules` over alerts.test.yml (each alert fires in its case, with its
# labels and rendered annotations, and stays quiet in the other).
# Usage: check-alerts.sh DIR (DIR holds alerts.yml and alerts.test.yml).
# promtool comes from Debian's prometheus package (deploy/install-deps.sh
# test); without it the test fails rather than passing unchecked.
set -euo pipefail
dir=$1
command -v promtool >/dev/null || {
    echo "promtool not found: deploy/install-deps.sh test installs it (Debian package prometheus)" >&2
    exit 1
}
cd "$dir"
promtool check rules alerts.yml
promtool test rules alerts.test.yml
