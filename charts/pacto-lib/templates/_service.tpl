{{/*
The gRPC Service (only when the chart has a gRPC server), its headless twin `<fullname>-peers`
(replicated backends only) and the metrics Service.
*/}}
{{- define "pacto.service" -}}
{{- if eq (include "pacto.hasGrpcServer" .) "true" }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pacto.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  selector:
    {{- include "pacto.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ .Values.grpc.port }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
---
{{- if eq (include "pacto.replicated" .) "true" }}
# Headless: one DNS address per ready replica, so that the status-writer balances its calls over
# all of them (docs/design/scaling.md#replicas-and-client-side-balancing). A separate Service, as
# clusterIP cannot change on an existing one.
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pacto.fullname" . }}-peers
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
spec:
  type: ClusterIP
  clusterIP: None
  publishNotReadyAddresses: false
  selector:
    {{- include "pacto.selectorLabels" . | nindent 4 }}
  ports:
    - name: grpc
      port: {{ .Values.grpc.port }}
      targetPort: grpc
      protocol: TCP
      appProtocol: grpc
---
{{- end }}
{{- end }}
{{- if .Values.metrics.service.enabled }}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "pacto.fullname" . }}-metrics
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pacto.labels" . | nindent 4 }}
    pacto.trianalab.io/metrics: "true"
spec:
  type: ClusterIP
  selector:
    {{- include "pacto.selectorLabels" . | nindent 4 }}
  ports:
    {{- include "pacto.metricsServicePorts" . | nindent 4 }}
{{- end }}
{{- end }}

{{/*
The metrics Service's ports: `metrics` (HTTPS, what scrapers use) when metrics are secure, and
`admin` (plain HTTP: /metrics when not secure; /healthz, /readyz and /version always).
*/}}
{{- define "pacto.metricsServicePorts" -}}
{{- if eq (include "pacto.metricsSecure" .) "true" }}
- name: metrics
  port: {{ .Values.metrics.securePort }}
  targetPort: metrics
  protocol: TCP
  appProtocol: https
{{- end }}
- name: admin
  port: {{ .Values.metrics.service.port }}
  targetPort: admin
  protocol: TCP
  appProtocol: http
{{- end }}
