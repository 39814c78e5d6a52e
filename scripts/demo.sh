#!/usr/bin/env bash
# The main job: set everything up, then run a local Dafka cluster (a tower, a
# producer and two consumers on ephemeral 127.0.0.1 ports), send 100,000 records
# in each dialect and check both consumers get every one in order.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
dafka demo --records 100000 --wire rfc
dafka demo --records 100000 --wire zproto
