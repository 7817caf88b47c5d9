{{/*
The ServiceMonitor scraping the metrics Service. Secure metrics (docs/metrics.md#secure-metrics):
port `metrics` over HTTPS, the server verified with the CA of this service's TLS Secret under the
certificate's first DNS name (never insecureSkipVerify), and a bearer token Prometheus's
ServiceAccount must have pacto-metrics-reader for: its own token file by default (rotated by the
kubelet, no long-lived Secret), or metrics.serviceMonitor.bearerTokenSecret.
*/}}
{{- define "pacto.serviceMonitor" -}}
{{- if and .Values.metrics.service.enabled .Values.metrics.serviceMonitor.enabled }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "pacto.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
    {{- with .Values.metrics.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "pacto.selectorLabels" . | nindent 6 }}
      pacto.trianalab.io/metrics: "true"
  namespaceSelector:
    matchNames:
      - {{ .Release.Namespace }}
  endpoints:
    - {{ include "pacto.scrapeEndpoint" . | trim | indent 6 | trim }}
{{- end }}
{{- end }}

{{/* One scrape endpoint of a ServiceMonitor (the port, scheme, credentials and TLS settings). */}}
{{- define "pacto.scrapeEndpoint" -}}
{{- if eq (include "pacto.metricsSecure" .) "true" }}
port: metrics
path: /metrics
scheme: https
{{- $secret := .Values.metrics.serviceMonitor.bearerTokenSecret | default dict }}
{{- if $secret.name }}
authorization:
  type: Bearer
  credentials:
    name: {{ $secret.name }}
    key: {{ $secret.key | default "token" }}
{{- else }}
bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
{{- end }}
tlsConfig:
  ca:
    secret:
      name: {{ include "pacto.tlsSecretName" . }}
      key: {{ (.Values.tls.keys | default dict).ca | default "ca.crt" }}
  serverName: {{ include "pacto.identity" . }}
  insecureSkipVerify: false
{{- else }}
port: admin
path: /metrics
scheme: http
{{- end }}
honorLabels: {{ include "pacto.honorLabels" . }}
{{- with .Values.metrics.serviceMonitor.interval }}
interval: {{ . }}
{{- end }}
{{- with .Values.metrics.serviceMonitor.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- end }}
