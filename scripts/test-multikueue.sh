#!/usr/bin/env bash
# The MultiKueue test (controller/tests/cluster_multikueue.rs): a manager and a worker cluster on
# loopback, trial Jobs dispatched by MultiKueue, the run completing on the manager from the
# results the worker cluster's pods stored. Opt-in, not part of CI's suite: MultiKueue needs Job
# `spec.managedBy` (Kubernetes 1.30+, on by default from 1.32) and CI's control plane is 1.28,
# the floor we support; building a second control plane would add ~10-30 minutes to CI.
#
#   scripts/test-multikueue.sh            # Kubernetes 1.34.4 (cold build about 10 min on 2 cores)
#   LIGHTSOUT_MULTIKUEUE_KUBE_VERSION=1.37.2 scripts/test-multikueue.sh
set -euo pipefail
cd "$(dirname "$0")/.."
version="${LIGHTSOUT_MULTIKUEUE_KUBE_VERSION:-1.34.4}"
cargo build --workspace --bins --locked
CI=true LIGHTSOUT_KUBE_VERSION="$version" exec scripts/test.sh -p lightsout-controller --test cluster_multikueue -- --nocapture
