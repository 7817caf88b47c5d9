{{/*
The service's NetworkPolicy; the chart's pacto.grpcIngressFrom and pacto.egressRules name
the allowed peers.
*/}}
{{- define "pacto.networkPolicy" -}}
{{- if .Values.networkPolicy.enabled }}
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "pacto.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "pacto.selectorLabels" . | nindent 6 }}
  policyTypes:
    - Ingress
    - Egress
  ingress:
    {{- if eq (include "pacto.hasGrpcServer" .) "true" }}
    - from:
        {{- include "pacto.grpcIngressFrom" . | nindent 8 }}
      ports:
        - port: grpc
          protocol: TCP
    {{- end }}
    {{- /* Scrapers reach /metrics: the HTTPS port when secure, else the admin port (which then
    admits no pod: probes come from the kubelet). */}}
    - from:
        {{- toYaml .Values.networkPolicy.metricsFrom | nindent 8 }}
      ports:
        - port: {{ if eq (include "pacto.metricsSecure" .) "true" }}metrics{{ else }}admin{{ end }}
          protocol: TCP
  {{- $egress := include "pacto.egressRules" . | trim }}
  {{- if or $egress (eq (include "pacto.apiAccess" .) "true") }}
  egress:
    {{- if eq (include "pacto.apiAccess" .) "true" }}
    - to:
        {{- toYaml .Values.networkPolicy.dns.to | nindent 8 }}
      ports:
        - port: 53
          protocol: UDP
        - port: 53
          protocol: TCP
    - to:
        {{- range .Values.networkPolicy.apiServer.cidrs }}
        - ipBlock:
            cidr: {{ . }}
        {{- end }}
      ports:
        {{- range .Values.networkPolicy.apiServer.ports }}
        - port: {{ . }}
          protocol: TCP
        {{- end }}
    {{- end }}
    {{- if $egress }}
    {{- $egress | nindent 4 }}
    {{- end }}
  {{- else }}
  egress: []
  {{- end }}
{{- end }}
{{- end }}
