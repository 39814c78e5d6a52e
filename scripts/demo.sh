#!/usr/bin/env bash
# The main job: set everything up, then run the demonstration.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
dafka wire demo
