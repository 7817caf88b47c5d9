{{/*
The service's PrometheusRule: the alerts every service has, then the chart's pacto.alertRules.
*/}}
{{- define "pacto.prometheusRule" -}}
{{- if .Values.metrics.prometheusRule.enabled }}
{{- $job := printf "%s-metrics" (include "pacto.fullname" .) }}
{{- $ctx := dict "job" $job "namespace" .Release.Namespace "Values" .Values }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "pacto.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
    {{- with .Values.metrics.prometheusRule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  groups:
    - name: {{ include "pacto.fullname" . }}
      rules:
        - alert: {{ include "pacto.alertPrefix" . }}Down
          expr: absent(up{job="{{ $job }}",namespace="{{ .Release.Namespace }}"} == 1)
          for: 5m
          labels:
            severity: critical
          annotations:
            summary: No {{ include "pacto.component" . }} instance is being scraped successfully.
            description: Prometheus has not scraped {{ $job }} in {{ .Release.Namespace }} for 5 minutes; the service is down or its admin port is unreachable.
        - alert: {{ include "pacto.alertPrefix" . }}TlsReloadFailing
          expr: increase(pacto_tls_reloads_total{job="{{ $job }}",namespace="{{ .Release.Namespace }}",result="error"}[15m]) > 0
          for: 15m
          labels:
            severity: warning
          annotations:
            summary: Changed certificate files could not be loaded.
            description: The service keeps the previous certificate; check the mounted Secret (tls.crt, tls.key, ca.crt).
        {{- include "pacto.alertRules" $ctx | nindent 8 }}
        {{- with .Values.metrics.prometheusRule.additionalRules }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end }}
{{- end }}
