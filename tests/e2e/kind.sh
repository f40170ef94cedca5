#!/usr/bin/env bash
# End-to-end test on kind: the quickstart run (single-shot harness, judged by a panel), executed
# by the controller in a local cluster against the scripted model server and an S3-compatible
# store (moto), both in the cluster. See tests/e2e/README.md.
#
#   tests/e2e/kind.sh
#
# Environment:
#   KIND_CLUSTER=lightsout-e2e   the kind cluster; reused when it exists (and then kept)
#   KEEP_CLUSTER=1               keep a cluster this script created (default: delete it on exit)
#   SKIP_BUILD=1                 use the controller image already built under IMAGE_REPOSITORY:IMAGE_TAG
#   IMAGE_REPOSITORY, IMAGE_TAG  the controller image (ghcr.io/lightsout-dev/lightsout, e2e)
#   RELEASE_NAMESPACE            where the chart is installed (lightsout-system)
#   RUN_NAMESPACE                where the run, the model server and S3 live (lightsout-e2e)
#   RUN_TIMEOUT=20m              how long the run may take
#   CONTROLLER_REPLICAS=2        controller replicas (leader election makes one active)
#   HELM_EXTRA_ARGS              more `helm upgrade --install` arguments (word-split)
set -euo pipefail
cd "$(dirname "$0")/../.."

KIND_CLUSTER=${KIND_CLUSTER:-lightsout-e2e}
KEEP_CLUSTER=${KEEP_CLUSTER:-0}
SKIP_BUILD=${SKIP_BUILD:-0}
IMAGE_REPOSITORY=${IMAGE_REPOSITORY:-ghcr.io/lightsout-dev/lightsout}
IMAGE_TAG=${IMAGE_TAG:-e2e}
RELEASE_NAMESPACE=${RELEASE_NAMESPACE:-lightsout-system}
RUN_NAMESPACE=${RUN_NAMESPACE:-lightsout-e2e}
RUN_TIMEOUT=${RUN_TIMEOUT:-20m}
CONTROLLER_REPLICAS=${CONTROLLER_REPLICAS:-2}
HELM_EXTRA_ARGS=${HELM_EXTRA_ARGS:-}

IMAGE="$IMAGE_REPOSITORY:$IMAGE_TAG"
CONTEXT="kind-$KIND_CLUSTER"
RELEASE=lightsout
CONTROLLER_SELECTOR="app.kubernetes.io/instance=$RELEASE,app.kubernetes.io/component=controller"
RUN_NAME=quickstart
BUCKET=lightsout-e2e
DATASET_KEY=datasets/sample/crbugbench.jsonl
# Each invocation writes its results under a fresh prefix: a reused cluster keeps the S3 store,
# and the controller would otherwise resume the previous invocation's run from its results.
RESULTS_PREFIX="results/$(date -u +%Y%m%dT%H%M%SZ)"
# The quickstart's harness is single-shot, built into the worker: no harness image is needed.

log() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
k() { kubectl --context "$CONTEXT" "$@"; }
kr() { k --namespace "$RUN_NAMESPACE" "$@"; }

for tool in kind docker kubectl helm; do
  command -v "$tool" >/dev/null || die "$tool is not installed (needed: kind, docker, kubectl, helm)"
done

created_cluster=0
cleanup() {
  local status=$?
  if [ "$created_cluster" = 1 ] && [ "$KEEP_CLUSTER" != 1 ]; then
    log "deleting kind cluster $KIND_CLUSTER (KEEP_CLUSTER=1 keeps it)"
    kind delete cluster --name "$KIND_CLUSTER" || true
  elif [ "$status" != 0 ]; then
    printf '\nthe cluster is kept: kubectl --context %s -n %s get evalrun,jobs,pods\n' \
      "$CONTEXT" "$RUN_NAMESPACE" >&2
  fi
  exit "$status"
}
trap cleanup EXIT

dump() {
  log "diagnostics"
  k -n "$RELEASE_NAMESPACE" get deploy,pods -o wide || true
  local pod
  for pod in $(k -n "$RELEASE_NAMESPACE" get pods -l "$CONTROLLER_SELECTOR" -o name 2>/dev/null); do
    log "logs of $pod"
    k -n "$RELEASE_NAMESPACE" logs "$pod" --all-containers --tail=300 || true
  done
  log "run $RUN_NAME"
  kr get evalrun "$RUN_NAME" -o yaml || true
  log "jobs, pods, network policies in $RUN_NAMESPACE"
  kr get jobs,pods,networkpolicies -o wide || true
  for pod in $(kr get pods -l "lightsout.dev/run=$RUN_NAME" -o name 2>/dev/null | head -n 10); do
    log "$pod"
    kr describe "$pod" | tail -n 40 || true
    kr logs "$pod" --all-containers --tail=100 || true
  done
  log "model server and S3 logs"
  kr logs deploy/scripted-model --all-containers --tail=100 || true
  kr logs deploy/s3 --tail=50 || true
  log "events in $RUN_NAMESPACE and $RELEASE_NAMESPACE"
  kr get events --sort-by=.lastTimestamp | tail -n 60 || true
  k -n "$RELEASE_NAMESPACE" get events --sort-by=.lastTimestamp | tail -n 30 || true
}

# --- cluster -------------------------------------------------------------------------------
if kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  log "reusing kind cluster $KIND_CLUSTER"
else
  log "creating kind cluster $KIND_CLUSTER"
  created_cluster=1
  kind create cluster --name "$KIND_CLUSTER" --wait 120s
fi
k cluster-info >/dev/null

# --- images --------------------------------------------------------------------------------
if [ "$SKIP_BUILD" != 1 ]; then
  log "building $IMAGE (a release build: several minutes)"
  DOCKER_BUILDKIT=1 docker build -f images/controller.Dockerfile -t "$IMAGE" .
fi
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no image $IMAGE (unset SKIP_BUILD to build it)"
log "loading $IMAGE into kind"
kind load docker-image "$IMAGE" --name "$KIND_CLUSTER"

# --- the chart -----------------------------------------------------------------------------
log "installing the chart into $RELEASE_NAMESPACE"
# shellcheck disable=SC2086 # HELM_EXTRA_ARGS is a list of words on purpose
helm upgrade --install "$RELEASE" charts/lightsout \
  --kube-context "$CONTEXT" --namespace "$RELEASE_NAMESPACE" --create-namespace \
  --set image.repository="$IMAGE_REPOSITORY" --set image.tag="$IMAGE_TAG" --set image.pullPolicy=Never \
  --set replicas="$CONTROLLER_REPLICAS" --set logFormat=text \
  --wait --timeout 5m $HELM_EXTRA_ARGS || { dump; die "the chart did not become ready"; }
if [ "$created_cluster" = 0 ]; then
  # A reused cluster may run an older image under the same tag.
  k -n "$RELEASE_NAMESPACE" rollout restart deployment -l "$CONTROLLER_SELECTOR"
  k -n "$RELEASE_NAMESPACE" rollout status deployment -l "$CONTROLLER_SELECTOR" --timeout=5m \
    || { dump; die "the controller did not restart"; }
fi

# --- the run's namespace: trial ServiceAccount, model server, S3 ---------------------------
log "preparing namespace $RUN_NAMESPACE"
k create namespace "$RUN_NAMESPACE" --dry-run=client -o yaml | k apply -f -

# Earlier versions of this script ran a forwarder next to the model server; remove its ConfigMap.
kr delete configmap scripted-model-forwarder --ignore-not-found
kr apply -f - <<EOF
# Trial pods run under this ServiceAccount in the run's namespace (the chart creates it in its
# own namespace only).
apiVersion: v1
kind: ServiceAccount
metadata:
  name: lightsout-trial
automountServiceAccountToken: false
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: scripted-model
spec:
  replicas: 1
  # One server at a time: each keeps its own simulated prompt cache.
  strategy: {type: Recreate}
  selector:
    matchLabels: {app: scripted-model}
  template:
    metadata:
      labels: {app: scripted-model}
    spec:
      # The server stops on SIGTERM (or SIGINT), finishing in-flight requests for up to 5 s.
      terminationGracePeriodSeconds: 10
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
        - name: server
          image: $IMAGE
          imagePullPolicy: Never
          command: ["/lightsout", "scripted-server", "--listen", "0.0.0.0:8080"]
          ports:
            - {name: http, containerPort: 8080}
          readinessProbe:
            httpGet: {path: /healthz, port: 8080}
            periodSeconds: 2
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata:
  name: scripted-model
spec:
  selector: {app: scripted-model}
  ports:
    - {name: http, port: 8080, targetPort: 8080}
---
# moto's S3 server, installed from PyPI when the pod starts (the pod needs network access).
apiVersion: apps/v1
kind: Deployment
metadata:
  name: s3
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector:
    matchLabels: {app: s3}
  template:
    metadata:
      labels: {app: s3}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
        - name: moto
          image: python:3.12-slim
          command:
            - sh
            - -c
            - pip install --quiet --no-cache-dir --root-user-action=ignore 'moto[server]==5.2.5' && exec moto_server -H 0.0.0.0 -p 5000
          ports:
            - {name: s3, containerPort: 5000}
          readinessProbe:
            tcpSocket: {port: 5000}
            periodSeconds: 3
            failureThreshold: 100
---
apiVersion: v1
kind: Service
metadata:
  name: s3
spec:
  selector: {app: s3}
  ports:
    - {name: s3, port: 5000, targetPort: 5000}
EOF

if [ "$created_cluster" = 0 ]; then
  kr rollout restart deployment/scripted-model  # it runs the controller image, maybe rebuilt
fi

log "waiting for the model server and S3"
kr rollout status deploy/scripted-model --timeout=5m || { dump; die "the scripted model server did not start"; }
kr rollout status deploy/s3 --timeout=10m || { dump; die "moto did not start (it is installed from PyPI at start)"; }

# Runs name the two servers by their Services' DNS names. Trial pods are confined by a per-run
# NetworkPolicy, which cannot allow egress by name: the controller looks each in-cluster Service
# up and allows its pods (the Service's pod selector) on its target port (numeric above, since a
# named target port cannot be resolved from the Service alone).
S3_ENDPOINT="http://s3.$RUN_NAMESPACE.svc:5000"
MODEL_URL="http://scripted-model.$RUN_NAMESPACE.svc:8080/v1"
log "model server $MODEL_URL, S3 $S3_ENDPOINT"

log "creating bucket $BUCKET and uploading the dataset"
# shellcheck disable=SC2016 # Python source, not shell
kr exec -i deploy/s3 -- python3 -c '
import sys, boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:5000", region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
bucket, key = sys.argv[1], sys.argv[2]
try:
    s3.create_bucket(Bucket=bucket)
except s3.exceptions.BucketAlreadyOwnedByYou:
    pass
s3.put_object(Bucket=bucket, Key=key, Body=sys.stdin.buffer.read())
size = s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
print("s3://%s/%s: %d bytes" % (bucket, key, size))
' "$BUCKET" "$DATASET_KEY" < datasets/sample/crbugbench.jsonl

log "creating the Secrets"
secret() { kr create secret generic "$@" --dry-run=client -o yaml | kr apply -f -; }
# The scripted server accepts any non-empty key; moto any credentials.
secret openai --from-literal=api-key=scripted-e2e
secret anthropic --from-literal=api-key=scripted-e2e
secret lightsout-e2e-s3 --from-literal=AWS_ACCESS_KEY_ID=test --from-literal=AWS_SECRET_ACCESS_KEY=test

# --- the run -------------------------------------------------------------------------------
log "applying EvaluationRun $RUN_NAME (manifests/examples/quickstart.yaml, pointed at the cluster)"
kr delete evalrun "$RUN_NAME" --ignore-not-found --timeout=2m
kr apply -f - <<EOF
apiVersion: lightsout.dev/v1alpha1
kind: EvaluationRun
metadata:
  name: $RUN_NAME
spec:
  dataset:
    format: crbugbench
    source: s3://$BUCKET/$DATASET_KEY
    s3:
      endpoint: $S3_ENDPOINT
      region: us-east-1
      secretName: lightsout-e2e-s3
  agent:
    harness: {name: single-shot, version: "1.0.0"}
    prompt: {preset: default}
    timeout: 5m
  matrix:
    models:
      - {name: gpt-5-mini, provider: openai}
      - {name: claude-sonnet-4-5, provider: anthropic}
    reasoningEfforts: [low, high]
    repeats: 1
  judges:
    panel:
      - {name: gpt-5, provider: openai}
      - {name: claude-haiku-4-5, provider: anthropic}
      - {name: gpt-4.1, provider: openai}
    vote: majority
    k: [1, 3, 5]
  providers:
    openai:
      baseUrl: $MODEL_URL
      apiKind: openai-chat
      secretRef: {name: openai, key: api-key}
    anthropic:
      baseUrl: $MODEL_URL
      apiKind: anthropic
      secretRef: {name: anthropic, key: api-key}
  storage:
    results: s3://$BUCKET/$RESULTS_PREFIX
    s3:
      endpoint: $S3_ENDPOINT
      region: us-east-1
      secretName: lightsout-e2e-s3
  parallelism: 4
  retries: 2
  budget:
    maxUSD: 5
    maxTrialUSD: 0.5
EOF

log "waiting up to $RUN_TIMEOUT for the run to complete"
if ! kr wait --for=condition=Complete "evalrun/$RUN_NAME" --timeout="$RUN_TIMEOUT"; then
  kr get evalrun "$RUN_NAME" || true
  dump
  die "the run did not complete within $RUN_TIMEOUT"
fi

log "done"
kr get evalrun "$RUN_NAME"
kr get evalrun "$RUN_NAME" -o yaml | sed -n '/^status:/,$p'
printf '\nresults: s3://%s/%s (moto, in the cluster: kubectl --context %s -n %s port-forward svc/s3 5000)\n' \
  "$BUCKET" "$RESULTS_PREFIX" "$CONTEXT" "$RUN_NAMESPACE"
