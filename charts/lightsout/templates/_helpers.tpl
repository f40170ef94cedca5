{{/* The chart name, at most 63 characters. */}}
{{- define "lightsout.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's object name prefix: the release name, with the chart name unless it has it. */}}
{{- define "lightsout.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The controller's ServiceAccount, ClusterRole, Deployment and Service name. */}}
{{- define "lightsout.controllerName" -}}
{{- printf "%s-controller" (include "lightsout.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "lightsout.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lightsout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "lightsout.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "lightsout.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The controller image, which is also the worker image of trial pods. */}}
{{- define "lightsout.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The ConfigMap of the controller's network configuration and pricing table. */}}
{{- define "lightsout.configName" -}}
{{- printf "%s-config" (include "lightsout.controllerName" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Whether that ConfigMap exists: some of networkConfig and pricing is set. */}}
{{- define "lightsout.hasConfig" -}}
{{- if or .Values.networkConfig .Values.pricing -}}true{{- end -}}
{{- end -}}

{{/*
Fails rendering with an explanation when a Prometheus Operator object is requested but the
cluster (or `helm template --api-versions`) has no monitoring.coreos.com/v1 API. Called with
(list $ "metrics.serviceMonitor.enabled" "ServiceMonitor").
*/}}
{{- define "lightsout.requireMonitoringApi" -}}
{{- $root := index . 0 -}}
{{- $value := index . 1 -}}
{{- $kind := index . 2 -}}
{{- if not ($root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") -}}
{{- fail (printf "%s=true renders a %s, which requires the Prometheus Operator CRDs (monitoring.coreos.com/v1), and this cluster does not serve that API: install kube-prometheus-stack (or the Prometheus Operator) first, or set %s=false. With `helm template`, pass --api-versions monitoring.coreos.com/v1." $value $kind $value) -}}
{{- end -}}
{{- end -}}

{{/* The NetworkPolicy peers of the cluster DNS (networkPolicy.dns). */}}
{{- define "lightsout.dnsPeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ .Values.networkPolicy.dns.namespace }}
  podSelector:
    matchLabels:
      {{- toYaml .Values.networkPolicy.dns.podSelector | nindent 6 }}
{{- end -}}
