#!/usr/bin/env python3
"""Prints a CRD (YAML file) as JSON with every maxLength, maxItems and maxProperties of its schema
multiplied by FACTOR, to measure how far its CEL rules are from the API server's cost budget.

    python3 tests/api_server/scale_bounds.py crds/evaluationrun.yaml 32 | kubectl apply --dry-run=server -f -
"""
import json
import sys

import yaml

path, factor = sys.argv[1], float(sys.argv[2])
crd = yaml.safe_load(open(path))
def walk(n):
    if isinstance(n, dict):
        for k in ("maxLength", "maxItems", "maxProperties"):
            if k in n: n[k] = int(n[k] * factor)
        for k, v in n.items():
            if k in ("properties",):
                for c in v.values(): walk(c)
            elif k in ("items", "additionalProperties"):
                walk(v)
walk(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
json.dump(crd, sys.stdout)
