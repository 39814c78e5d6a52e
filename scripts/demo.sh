#!/usr/bin/env bash
# The main job: set everything up, then run a local Dafka cluster (a tower, a store,
# a producer and a consumer on ephemeral 127.0.0.1 ports, no configuration), send
# 100,000 records in each dialect, check the store ACKs them durably and the consumer
# gets every one in order, then replay them from the store to a late consumer.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
dafka demo --records 100000 --wire rfc
dafka demo --records 100000 --wire zproto
